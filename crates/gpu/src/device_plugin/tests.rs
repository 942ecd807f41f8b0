//! Tests of the device plugin config: the fixed layout, the plugin's refusals, and properties tying the
//! renderer and the parser together (render then parse is the identity; parse then render is stable).

use super::*;
use crate::error::Field;
use proptest::prelude::*;

fn time_sliced(replicas: u32) -> DevicePluginConfig {
    DevicePluginConfig {
        mig_strategy: Some(MigStrategyFlag::None),
        allocation_policy: None,
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
    let mps =
        parse("sharing:\n  mps:\n    resources: [{name: nvidia.com/gpu, replicas: 4}]\n").unwrap();
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
    let one = parse_err("sharing:\n  timeSlicing:\n    resources: [{name: gpu, replicas: 1}]\n");
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
        parse_err("sharing:\n  timeSlicing:\n    resources: [{replicas: 2}]\n").contains("no name")
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
    let hex = parse("sharing: {timeSlicing: {resources: [{name: gpu, replicas: 0x10}]}}").unwrap();
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
    let policy = prop_oneof![
        Just(None),
        Just(Some(AllocationPolicy::Distributed)),
        Just(Some(AllocationPolicy::Packed)),
    ];
    (strategy, policy, sharing)
        .prop_map(
            |(mig_strategy, allocation_policy, sharing)| DevicePluginConfig {
                mig_strategy,
                allocation_policy,
                sharing,
            },
        )
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
    let mut flags = Vec::new();
    if let Some(p) = c.allocation_policy {
        flags.push(format!(
            "plugin: {{sharedDevicesAllocationPolicy: {}}}",
            p.as_str()
        ));
    }
    if let Some(m) = c.mig_strategy {
        flags.push(format!("migStrategy: {}", m.as_str()));
    }
    if !flags.is_empty() {
        parts.push(format!("flags: {{{}}}", flags.join(", ")));
    }
    parts.push("version: v1".into());
    format!("{{{}}}", parts.join(", "))
}

#[test]
fn the_allocation_policy_reads_renders_and_refuses_what_the_plugin_refuses() {
    let text = "version: v1\nflags:\n  plugin:\n    sharedDevicesAllocationPolicy: packed\nsharing:\n  \
        timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n";
    let cfg = parse(text).unwrap();
    assert_eq!(cfg.allocation_policy, Some(AllocationPolicy::Packed));
    let rendered = cfg.render().unwrap();
    assert!(
        rendered.contains("flags:\n  plugin:\n    sharedDevicesAllocationPolicy: packed\n"),
        "{rendered}"
    );
    assert_eq!(parse(&rendered).unwrap(), cfg);
    // Another value differs by meaning; none at all is the plugin's default, left unset.
    let distributed = parse(&text.replace("packed", "distributed")).unwrap();
    assert_ne!(distributed, cfg);
    assert_eq!(
        parse(&text.replace("packed", "\"\""))
            .unwrap()
            .allocation_policy,
        None
    );
    let e = parse(&text.replace("packed", "Packed")).unwrap_err();
    assert!(
        e.detail.contains("sharedDevicesAllocationPolicy")
            && e.detail.contains("distributed, packed"),
        "{}",
        e.detail
    );
}
