//! The NVIDIA device plugin's config document (api/config/v1), as the plugin reads it.
//!
//! We model only what decides how a node advertises its GPUs: `flags.migStrategy` and `sharing`
//! (timeSlicing or mps). Everything else the plugin reads (other flags, `resources`, `imex`) is ignored
//! here, as the plugin ignores keys it does not know; a resource entry's `rename` and `devices` are accepted
//! and dropped because current plugins ignore them too.
//!
//! Parsing normalises to the meaning the plugin gives a document, so a hand-written config with another key
//! order, flow style or comments compares equal to ours: resource names get the plugin's `nvidia.com/`
//! prefix, a missing `failRequestsGreaterThanOne` is false for time-slicing and true for MPS (the plugin
//! forces it for MPS unless set). Rendering is ours, not a serializer's, so the text is fixed: the same
//! model always gives the same bytes, and the provider can compare a deployed config by text or by model.
//!
//! The empty document is a real config: the GPU operator's chart writes `""` for the "all" (no sharing)
//! key. It means version v1, no sharing (each GPU advertised once), and `migStrategy` left to the plugin's
//! command line, which the operator fills from ClusterPolicy `spec.mig.strategy`. It parses to
//! `DevicePluginConfig::default()`, and that model renders back to the empty string.

use super::error::{DomainError, Field, summary};
use serde::Deserialize;
use std::fmt;

/// The only config version the plugin knows.
pub const CONFIG_VERSION: &str = "v1";
/// The prefix the plugin puts on resource names that lack it.
pub const RESOURCE_PREFIX: &str = "nvidia.com";
/// The plugin's limit on a fully-qualified resource name.
pub const MAX_RESOURCE_NAME_LEN: usize = 63;

/// `flags.migStrategy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MigStrategyFlag {
    None,
    Single,
    Mixed,
}

impl MigStrategyFlag {
    pub fn as_str(self) -> &'static str {
        match self {
            MigStrategyFlag::None => "none",
            MigStrategyFlag::Single => "single",
            MigStrategyFlag::Mixed => "mixed",
        }
    }
}

/// Which of the plugin's two sharing mechanisms a `sharing` block configures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SharingKind {
    TimeSlicing,
    Mps,
}

impl SharingKind {
    fn key(self) -> &'static str {
        match self {
            SharingKind::TimeSlicing => "timeSlicing",
            SharingKind::Mps => "mps",
        }
    }
}

/// One entry of `sharing.<kind>.resources`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReplicatedResource {
    /// Fully qualified (`nvidia.com/gpu`, `nvidia.com/mig-1g.5gb`).
    pub name: String,
    pub replicas: u32,
}

/// The `sharing` block: timeSlicing or mps (the plugin refuses both at once, so the model cannot say it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Sharing {
    pub kind: SharingKind,
    pub rename_by_default: bool,
    pub fail_requests_greater_than_one: bool,
    pub resources: Vec<ReplicatedResource>,
}

/// One named config of the device plugin's ConfigMap.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct DevicePluginConfig {
    /// `None` leaves the strategy to the plugin's command line (see the module docs).
    pub mig_strategy: Option<MigStrategyFlag>,
    pub sharing: Option<Sharing>,
}

impl DevicePluginConfig {
    /// The empty ("all") config: no sharing, MIG strategy from the plugin's command line.
    pub fn is_empty(&self) -> bool {
        self.mig_strategy.is_none() && self.sharing.is_none()
    }

    /// Checks the model against what the plugin refuses, so we never write a config a node would reject.
    pub fn validate(&self) -> Result<(), DomainError> {
        let Some(sharing) = &self.sharing else {
            return Ok(());
        };
        let key = sharing.kind.key();
        if sharing.resources.is_empty() {
            return Err(invalid(format!(
                "sharing.{key} has no resources: the plugin refuses it (\"no resources specified\"). \
                 List at least one resource, e.g. {{name: nvidia.com/gpu, replicas: 10}}."
            )));
        }
        for r in &sharing.resources {
            check_resource_name(&r.name, key)?;
            if r.name != qualify(&r.name) {
                return Err(invalid(format!(
                    "sharing.{key} resource \"{}\" is not fully qualified; write \"{}\".",
                    r.name,
                    qualify(&r.name)
                )));
            }
            check_replicas(i64::from(r.replicas), &r.name, key)?;
        }
        if sharing.kind == SharingKind::Mps {
            if self.mig_strategy == Some(MigStrategyFlag::Mixed) {
                return Err(invalid(
                    "sharing.mps with flags.migStrategy mixed: the plugin runs MPS on full GPUs only and \
                     refuses it with the mixed strategy. Use migStrategy none (or single), or time-slicing.",
                ));
            }
            if let Some(r) = sharing.resources.iter().find(|r| r.name != GPU_RESOURCE) {
                return Err(invalid(format!(
                    "sharing.mps resource \"{}\": MPS shares only full GPUs, advertised as {GPU_RESOURCE}. \
                     Valid values: {GPU_RESOURCE}.",
                    r.name
                )));
            }
        }
        Ok(())
    }

    /// Renders the document the plugin reads, in a fixed layout. The empty config renders as `""`, the
    /// chart's spelling of the "all" config. Fails for a model the plugin would refuse.
    pub fn render(&self) -> Result<String, DomainError> {
        self.validate()?;
        if self.is_empty() {
            return Ok(String::new());
        }
        let mut out = format!("version: {CONFIG_VERSION}\n");
        if let Some(strategy) = self.mig_strategy {
            out.push_str("flags:\n");
            out.push_str(&format!("  migStrategy: {}\n", strategy.as_str()));
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

/// The resource name of a full GPU.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// Parses one named config as the plugin would, refusing what the plugin refuses.
pub fn parse(text: &str) -> Result<DevicePluginConfig, DomainError> {
    let raw: Option<RawConfig> = serde_saphyr::from_str(text).map_err(|e| {
        invalid(format!(
            "The document is not a device plugin config: {e}. Expected a mapping with version, flags \
             and sharing, or an empty document."
        ))
    })?;
    let Some(raw) = raw else {
        return Ok(DevicePluginConfig::default());
    };
    if let Some(version) = raw.version.as_deref()
        && !version.is_empty()
        && version != CONFIG_VERSION
    {
        return Err(invalid(format!(
            "version is \"{version}\": the plugin refuses it (unknown version). Valid values: \
             {CONFIG_VERSION}."
        )));
    }
    let mig_strategy = match raw.flags.and_then(|f| f.mig_strategy) {
        None => None,
        Some(s) => Some(match s.as_str() {
            "none" => MigStrategyFlag::None,
            "single" => MigStrategyFlag::Single,
            "mixed" => MigStrategyFlag::Mixed,
            other => {
                return Err(invalid(format!(
                    "flags.migStrategy is \"{other}\", which the plugin does not know. Valid values: \
                     none, single, mixed."
                )));
            }
        }),
    };
    let sharing = match raw.sharing {
        None => None,
        Some(RawSharing {
            time_slicing: Some(_),
            mps: Some(_),
        }) => {
            return Err(invalid(
                "sharing has both timeSlicing and mps: the plugin refuses them together on one node. \
                 Keep one of them.",
            ));
        }
        Some(RawSharing {
            time_slicing: Some(r),
            mps: None,
        }) => Some(sharing_from_raw(SharingKind::TimeSlicing, r)?),
        Some(RawSharing {
            time_slicing: None,
            mps: Some(r),
        }) => Some(sharing_from_raw(SharingKind::Mps, r)?),
        Some(RawSharing {
            time_slicing: None,
            mps: None,
        }) => None,
    };
    let config = DevicePluginConfig {
        mig_strategy,
        sharing,
    };
    config.validate()?;
    Ok(config)
}

fn sharing_from_raw(kind: SharingKind, raw: RawReplicated) -> Result<Sharing, DomainError> {
    let key = kind.key();
    let raw_resources = raw.resources.unwrap_or_default();
    if raw_resources.is_empty() {
        return Err(invalid(format!(
            "sharing.{key} has no resources: the plugin refuses it (\"no resources specified\"). List at \
             least one resource, e.g. {{name: nvidia.com/gpu, replicas: 10}}."
        )));
    }
    let mut resources = Vec::with_capacity(raw_resources.len());
    for r in raw_resources {
        let Some(name) = r.name else {
            return Err(invalid(format!(
                "A sharing.{key} resource has no name (\"no resource name specified\"). Add name, e.g. \
                 nvidia.com/gpu."
            )));
        };
        let name = qualify(&name);
        check_resource_name(&name, key)?;
        let Some(replicas) = r.replicas else {
            return Err(invalid(format!(
                "sharing.{key} resource \"{name}\" has no replicas (\"no replicas specified\"). Add \
                 replicas: 2 or more."
            )));
        };
        let replicas = check_replicas(replicas.0, &name, key)?;
        resources.push(ReplicatedResource { name, replicas });
    }
    Ok(Sharing {
        kind,
        rename_by_default: raw.rename_by_default.unwrap_or(false),
        fail_requests_greater_than_one: raw
            .fail_requests_greater_than_one
            .unwrap_or(kind == SharingKind::Mps),
        resources,
    })
}

/// The plugin's NewResourceName: prefix `nvidia.com/` unless present.
fn qualify(name: &str) -> String {
    if name.starts_with("nvidia.com/") {
        name.to_string()
    } else {
        format!("{RESOURCE_PREFIX}/{name}")
    }
}

fn check_resource_name(qualified: &str, key: &str) -> Result<(), DomainError> {
    if qualified.len() > MAX_RESOURCE_NAME_LEN {
        return Err(invalid(format!(
            "sharing.{key} resource \"{qualified}\" is {} characters long: the plugin refuses \
             fully-qualified resource names over {MAX_RESOURCE_NAME_LEN} characters. Use a shorter name.",
            qualified.len()
        )));
    }
    let local = qualified
        .split_once('/')
        .map_or(qualified, |(_, local)| local);
    if !is_dns_subdomain(local) {
        return Err(invalid(format!(
            "sharing.{key} resource \"{qualified}\" has an incorrect format: after \"nvidia.com/\" the \
             plugin wants lowercase letters, digits, '-' and '.', starting and ending with a letter or \
             digit (e.g. nvidia.com/gpu, nvidia.com/mig-1g.5gb)."
        )));
    }
    Ok(())
}

fn check_replicas(replicas: i64, name: &str, key: &str) -> Result<u32, DomainError> {
    if replicas < 2 {
        return Err(invalid(format!(
            "sharing.{key} resource \"{name}\" has replicas {replicas}: the plugin refuses it (\"number \
             of replicas must be >= 2\"). Use 2 or more, or drop the sharing block to advertise each GPU \
             once."
        )));
    }
    u32::try_from(replicas).map_err(|_| {
        invalid(format!(
            "sharing.{key} resource \"{name}\" has replicas {replicas}, more than any node can use."
        ))
    })
}

/// Kubernetes' DNS-1123 subdomain rule, which the plugin applies to the part after the prefix.
fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            let bytes = label.as_bytes();
            match (bytes.first(), bytes.last()) {
                (Some(first), Some(last)) => {
                    first.is_ascii_alphanumeric()
                        && last.is_ascii_alphanumeric()
                        && bytes
                            .iter()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
                }
                _ => false,
            }
        })
}

fn invalid(detail: impl Into<String>) -> DomainError {
    DomainError::new(
        Field::DevicePluginConfig,
        summary::INVALID_DEVICE_PLUGIN_CONFIG,
        detail,
    )
}

// What serde sees: everything optional, unknown keys ignored (as the plugin's JSON decoding does), so the
// checks above can answer with the plugin's own reasons.

#[derive(Deserialize)]
struct RawConfig {
    version: Option<String>,
    flags: Option<RawFlags>,
    sharing: Option<RawSharing>,
}

#[derive(Deserialize)]
struct RawFlags {
    #[serde(rename = "migStrategy")]
    mig_strategy: Option<String>,
}

#[derive(Deserialize)]
struct RawSharing {
    #[serde(rename = "timeSlicing")]
    time_slicing: Option<RawReplicated>,
    mps: Option<RawReplicated>,
}

#[derive(Deserialize)]
struct RawReplicated {
    #[serde(rename = "renameByDefault")]
    rename_by_default: Option<bool>,
    #[serde(rename = "failRequestsGreaterThanOne")]
    fail_requests_greater_than_one: Option<bool>,
    resources: Option<Vec<RawResource>>,
}

#[derive(Deserialize)]
struct RawResource {
    name: Option<String>,
    replicas: Option<Replicas>,
}

/// An integer written as a YAML number. The plugin decodes through JSON, where `"10"` is a string and does
/// not go into an int; serde-saphyr would parse the quoted form as a number, so we ask for the token type.
struct Replicas(i64);

impl<'de> Deserialize<'de> for Replicas {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Replicas;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer number of replicas (not a string or a fraction)")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Replicas, E> {
                Ok(Replicas(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Replicas, E> {
                Ok(Replicas(i64::try_from(v).unwrap_or(i64::MAX)))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn time_sliced(replicas: u32) -> DevicePluginConfig {
        DevicePluginConfig {
            mig_strategy: Some(MigStrategyFlag::None),
            sharing: Some(Sharing {
                kind: SharingKind::TimeSlicing,
                rename_by_default: false,
                fail_requests_greater_than_one: false,
                resources: vec![ReplicatedResource {
                    name: GPU_RESOURCE.into(),
                    replicas,
                }],
            }),
        }
    }

    #[test]
    fn renders_the_fixed_layout() {
        assert_eq!(
            time_sliced(10).render().unwrap(),
            "version: v1\nflags:\n  migStrategy: none\nsharing:\n  timeSlicing:\n    renameByDefault: \
             false\n    failRequestsGreaterThanOne: false\n    resources:\n    - name: nvidia.com/gpu\n      \
             replicas: 10\n"
        );
    }

    #[test]
    fn hand_written_yaml_in_any_style_parses_to_the_same_model() {
        let block = "# shared by ten\nsharing:\n  timeSlicing:\n    resources:\n    - replicas: 10  # ten\n      \
                     name: gpu\nflags: {migStrategy: none, failOnInitError: true}\nversion: v1\n";
        assert_eq!(parse(block).unwrap(), time_sliced(10));
        let flow = "{version: \"v1\", flags: {migStrategy: 'none'}, sharing: {timeSlicing: \
                    {renameByDefault: no, resources: [{name: nvidia.com/gpu, replicas: 10, devices: all}]}}}";
        assert_eq!(parse(flow).unwrap(), time_sliced(10));
    }

    #[test]
    fn empty_documents_are_the_all_config() {
        for text in [
            "",
            "\n",
            "# nothing here\n",
            "---\n",
            "version: v1\n",
            "null",
        ] {
            let config = parse(text).unwrap();
            assert!(config.is_empty(), "{text:?}");
            assert_eq!(config.render().unwrap(), "");
        }
    }

    #[test]
    fn mps_defaults_fail_requests_to_true_and_time_slicing_to_false() {
        let mps = parse("sharing:\n  mps:\n    resources: [{name: nvidia.com/gpu, replicas: 4}]\n")
            .unwrap();
        assert!(mps.sharing.unwrap().fail_requests_greater_than_one);
        let ts =
            parse("sharing:\n  timeSlicing:\n    resources: [{name: gpu, replicas: 4}]\n").unwrap();
        assert!(!ts.sharing.unwrap().fail_requests_greater_than_one);
    }

    fn parse_err(text: &str) -> String {
        let err = parse(text).unwrap_err();
        assert_eq!(err.summary, "Invalid device plugin config");
        assert_eq!(err.field, Field::DevicePluginConfig);
        err.detail
    }

    #[test]
    fn refuses_what_the_plugin_refuses() {
        let one =
            parse_err("sharing:\n  timeSlicing:\n    resources: [{name: gpu, replicas: 1}]\n");
        assert!(one.contains("number of replicas must be >= 2"), "{one}");
        let none = parse_err("sharing:\n  timeSlicing:\n    resources: []\n");
        assert!(none.contains("no resources specified"), "{none}");
        let missing = parse_err("sharing:\n  mps:\n    renameByDefault: true\n");
        assert!(missing.contains("no resources specified"), "{missing}");
        let version = parse_err("version: v2\n");
        assert!(
            version.contains("unknown version") && version.contains("v1"),
            "{version}"
        );
        let both = parse_err(
            "sharing:\n  timeSlicing:\n    resources: [{name: gpu, replicas: 2}]\n  mps:\n    resources: \
             [{name: gpu, replicas: 2}]\n",
        );
        assert!(both.contains("both timeSlicing and mps"), "{both}");
        let long = format!(
            "sharing:\n  timeSlicing:\n    resources: [{{name: {}, replicas: 2}}]\n",
            "a".repeat(53)
        );
        assert!(parse_err(&long).contains("over 63 characters"));
        // 52 + "nvidia.com/" = 63: exactly at the limit is fine.
        let at_limit = format!(
            "sharing:\n  timeSlicing:\n    resources: [{{name: {}, replicas: 2}}]\n",
            "a".repeat(52)
        );
        assert!(parse(&at_limit).is_ok());
        let mixed_mps = parse_err(
            "flags: {migStrategy: mixed}\nsharing:\n  mps:\n    resources: [{name: gpu, replicas: 2}]\n",
        );
        assert!(mixed_mps.contains("mixed"), "{mixed_mps}");
        assert!(parse_err("flags: {migStrategy: all}\n").contains("none, single, mixed"));
        assert!(
            parse_err("sharing:\n  timeSlicing:\n    resources: [{name: Bad_Name, replicas: 2}]\n")
                .contains("incorrect format")
        );
        assert!(
            parse_err("sharing:\n  timeSlicing:\n    resources: [{replicas: 2}]\n")
                .contains("no name")
        );
        assert!(
            parse_err("sharing:\n  timeSlicing:\n    resources: [{name: gpu}]\n")
                .contains("no replicas")
        );
        assert!(parse_err("[1, 2]").contains("not a device plugin config"));
        // The plugin decodes through JSON: a quoted number or a fraction is not an int there.
        for replicas in ["\"10\"", "10.0"] {
            let text = format!(
                "sharing: {{timeSlicing: {{resources: [{{name: gpu, replicas: {replicas}}}]}}}}"
            );
            assert!(
                parse_err(&text).contains("an integer number of replicas"),
                "{text}"
            );
        }
        let hex =
            parse("sharing: {timeSlicing: {resources: [{name: gpu, replicas: 0x10}]}}").unwrap();
        assert_eq!(hex.sharing.unwrap().resources[0].replicas, 16);
    }

    #[test]
    fn render_refuses_invalid_models() {
        assert!(time_sliced(1).render().is_err());
        let mut unqualified = time_sliced(2);
        if let Some(s) = unqualified.sharing.as_mut() {
            s.resources[0].name = "gpu".into();
        }
        assert!(unqualified.render().is_err());
    }

    fn resource_name() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(GPU_RESOURCE.to_string()),
            Just("nvidia.com/gpu.shared".to_string()),
            "[a-z0-9]{1,4}(-[a-z0-9]{1,4}){0,2}(\\.[a-z0-9]{1,6}){0,2}"
                .prop_map(|local| format!("nvidia.com/mig-{local}")),
        ]
    }

    fn valid_config() -> impl Strategy<Value = DevicePluginConfig> {
        let strategy = prop_oneof![
            Just(None),
            Just(Some(MigStrategyFlag::None)),
            Just(Some(MigStrategyFlag::Single)),
            Just(Some(MigStrategyFlag::Mixed)),
        ];
        let resources = prop::collection::vec(
            (resource_name(), 2u32..=1000)
                .prop_map(|(name, replicas)| ReplicatedResource { name, replicas }),
            1..4,
        );
        let sharing = prop::option::of(
            (any::<bool>(), any::<bool>(), any::<bool>(), resources).prop_map(
                |(mps, rename_by_default, fail_requests_greater_than_one, resources)| Sharing {
                    kind: if mps {
                        SharingKind::Mps
                    } else {
                        SharingKind::TimeSlicing
                    },
                    rename_by_default,
                    fail_requests_greater_than_one,
                    resources,
                },
            ),
        );
        (strategy, sharing)
            .prop_map(|(mig_strategy, sharing)| DevicePluginConfig {
                mig_strategy,
                sharing,
            })
            .prop_filter("the plugin refuses it", |c| c.validate().is_ok())
    }

    proptest! {
        #[test]
        fn parse_of_render_is_identity(config in valid_config()) {
            let text = config.render().unwrap();
            prop_assert_eq!(parse(&text).unwrap(), config);
        }

        #[test]
        fn render_of_parse_is_stable(config in valid_config(), flow in any::<bool>()) {
            // Start from hand-written text: flow style with keys reversed, or block style with comments.
            let text = if flow { to_flow(&config) } else { with_comments(&config.render().unwrap()) };
            let first = parse(&text).unwrap().render().unwrap();
            prop_assert_eq!(parse(&first).unwrap().render().unwrap(), first.clone());
            prop_assert_eq!(first, config.render().unwrap());
        }

        #[test]
        fn parse_never_panics(text in ".{0,200}") {
            let _ = parse(&text);
        }

        #[test]
        fn parse_never_panics_on_yamlish_text(
            text in "[a-zA-Z:{}\\[\\], \n\"'#0-9.-]{0,120}"
        ) {
            // Whatever parses must render, and that rendering must be a fixed point.
            if let Ok(config) = parse(&text) {
                let first = config.render().unwrap();
                prop_assert_eq!(parse(&first).unwrap().render().unwrap(), first);
            }
        }
    }

    /// Our layout with a comment on every line and a header comment.
    fn with_comments(text: &str) -> String {
        let mut out = String::from("# written by hand\n");
        for line in text.lines() {
            out.push_str(line);
            out.push_str("  # note\n");
        }
        out
    }

    /// A differently written but equivalent document: flow style, keys in reverse order.
    fn to_flow(c: &DevicePluginConfig) -> String {
        let mut parts = Vec::new();
        if let Some(s) = &c.sharing {
            let resources: Vec<String> = s
                .resources
                .iter()
                .map(|r| format!("{{replicas: {}, name: \"{}\"}}", r.replicas, r.name))
                .collect();
            parts.push(format!(
                "sharing: {{{}: {{resources: [{}], failRequestsGreaterThanOne: {}, renameByDefault: {}}}}}",
                s.kind.key(),
                resources.join(", "),
                s.fail_requests_greater_than_one,
                s.rename_by_default
            ));
        }
        if let Some(m) = c.mig_strategy {
            parts.push(format!("flags: {{migStrategy: {}}}", m.as_str()));
        }
        parts.push("version: v1".into());
        format!("{{{}}}", parts.join(", "))
    }
}
