//! What the provider, its resources and data sources share between the values users write and
//! the `gpu` domain: the schema pieces and typed models of the sharing blocks, taints,
//! tolerations and the `kubernetes` block, and domain errors as diagnostics on the attribute the
//! user wrote.

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::cluster::{ExecSettings, KubernetesSettings};

use gpu::{
    self, DomainError, Field, GkeSharing, GkeSharingStrategy, MigStrategy, SharingMode, Taint,
    TaintEffect,
};
use tfplugin::object::{Known, SingleBlock};
use tfplugin::schema::{Attribute, Block, Nesting};
use tfplugin::validators::{ConflictsWith, IntBetween, OneOf};
use tfplugin::{AttrPath, Diagnostic, Value};

pub const TAINT_EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// The `mig`, `time_slicing` and `mps` blocks; at most one may be set (none means whole GPUs).
/// `replace_on_change` marks the attributes whose change needs new nodes (for node pools).
pub fn sharing_blocks(block: Block, replace_on_change: bool) -> Block {
    let rr = |a: Attribute| {
        if replace_on_change {
            a.requires_replace()
        } else {
            a
        }
    };
    let gke_sharing = Block::new("GKE only: share each MIG instance further between clients.")
        .attr(
            Attribute::string("strategy")
                .required()
                .describe("`time-sharing` or `mps`.")
                .validate(OneOf(&["time-sharing", "mps"])),
        )
        .attr(
            Attribute::number("max_clients")
                .required()
                .describe("Clients per MIG instance, 2 to 48.")
                .validate(IntBetween(2, 48)),
        );
    block
        .single_block(
            "mig",
            Block::new("Split each GPU into hardware-isolated MIG instances of one profile. On a \
                node pool, changing the profile replaces the pool on AKS and GKE (the partitions \
                are set when nodes are made) and changes in place on EKS (the GPU operator's MIG \
                manager relabels nodes).")
                .attr(rr(Attribute::string("profile").required().describe(
                    "The MIG profile, e.g. `1g.10gb`; it must be a profile of the machine type's \
                        GPU (see `data.fracgpu_machine_type`).",
                )))
                .attr(
                    Attribute::string("strategy")
                        .optional()
                        .computed()
                        .describe("How the device plugin advertises instances: `mixed` (default; \
                            `nvidia.com/mig-<profile>`) or `single` (`nvidia.com/gpu`). It is part \
                            of the device plugin config: on a node pool a change applies in place.")
                        .validate(OneOf(&["single", "mixed"]))
                        .default_value(Value::string("mixed")),
                )
                .single_block("gke_sharing", gke_sharing),
        )
        .single_block(
            "time_slicing",
            Block::new("Advertise each GPU `replicas` times. No memory or fault isolation: each \
                workload must keep under its share of GPU memory by itself. On a node pool, \
                changes apply in place on AKS and EKS (a node label selects the device plugin \
                config) and replace the pool on GKE (its sharing config is fixed at creation).")
                .attr(
                    Attribute::number("replicas")
                        .required()
                        .describe("Slices per GPU, 2 to 48.")
                        .validate(IntBetween(2, 48)),
                )
                .attr(Attribute::bool("rename_by_default").optional().computed().describe(
                    "Advertise `nvidia.com/gpu.shared` instead of `nvidia.com/gpu` (AKS/EKS). \
                        Default `false`. Part of the device plugin config: on a node pool a change \
                        applies in place.",
                ).default_value(Value::Bool(false)))
                .attr(Attribute::bool("fail_requests_greater_than_one").optional().computed().describe(
                    "Refuse pods that request more than one slice (AKS/EKS). Default `false`. Part \
                        of the device plugin config: on a node pool a change applies in place.",
                ).default_value(Value::Bool(false))),
        )
        .single_block(
            "mps",
            Block::new("Share each GPU between `replicas` CUDA MPS clients, each capped at \
                1/replicas of its memory. On a node pool, changes apply in place on AKS and EKS \
                and replace the pool on GKE.")
                .attr(
                    Attribute::number("replicas")
                        .required()
                        .describe("Clients per GPU, 2 to 48 (16 on GPUs below compute capability 7.5).")
                        .validate(IntBetween(2, 48)),
                )
                .attr(Attribute::bool("fail_requests_greater_than_one").optional().computed().describe(
                    "Refuse pods that request more than one client's share. Default `true`, the \
                        device plugin's own for MPS. `false` lets a container take several \
                        (AKS/EKS with NVIDIA's device plugin v0.20.0 or later, which GPU operator \
                        v26.7.0 runs; earlier plugins refuse such requests whatever the config \
                        says, and the apply warns when it finds one). Part of the device plugin \
                        config: on a node pool a change applies in place.",
                ).default_value(Value::Bool(true))),
        )
        .validate(ConflictsWith(&["mig", "time_slicing", "mps"]))
}

/// The `taints` attribute: a list of `{key, value, effect}`.
pub fn taints_attribute(description: &str) -> Attribute {
    Attribute::nested(
        "taints",
        Nesting::List,
        vec![
            Attribute::string("key").required().describe("Taint key."),
            Attribute::string("value")
                .optional()
                .describe("Taint value. Default empty."),
            Attribute::string("effect")
                .required()
                .describe("`NoSchedule`, `PreferNoSchedule` or `NoExecute`.")
                .validate(OneOf(TAINT_EFFECTS)),
        ],
    )
    .describe(description)
}

tfplugin::object! {
    /// `mig.gke_sharing`.
    pub struct GkeSharingArgs {
        pub strategy: String,
        pub max_clients: u32,
    }
}

tfplugin::object! {
    /// The `mig` block.
    pub struct MigArgs {
        pub profile: String,
        pub strategy: Option<String>,
        pub gke_sharing: SingleBlock<GkeSharingArgs>,
    }
}

tfplugin::object! {
    /// The `time_slicing` block.
    pub struct TimeSlicingArgs {
        pub replicas: u32,
        pub rename_by_default: Option<bool>,
        pub fail_requests_greater_than_one: Option<bool>,
    }
}

tfplugin::object! {
    /// The `mps` block.
    pub struct MpsArgs {
        pub replicas: u32,
        pub fail_requests_greater_than_one: Option<bool>,
    }
}

tfplugin::object! {
    /// The sharing blocks of [`sharing_blocks`]: at most one is set, none means whole GPUs.
    pub struct Sharing {
        pub mig: SingleBlock<MigArgs>,
        pub time_slicing: SingleBlock<TimeSlicingArgs>,
        pub mps: SingleBlock<MpsArgs>,
    }
}

impl Sharing {
    /// The domain's sharing mode; an optional attribute left null takes its schema default.
    pub fn mode(&self) -> SharingMode {
        if let Some(m) = &*self.mig {
            return SharingMode::Mig {
                profile: m.profile.clone(),
                strategy: match m.strategy.as_deref() {
                    Some("single") => MigStrategy::Single,
                    _ => MigStrategy::Mixed,
                },
                gke_sharing: m.gke_sharing.as_ref().map(|g| GkeSharing {
                    strategy: GkeSharingStrategy::parse(&g.strategy)
                        .unwrap_or(GkeSharingStrategy::TimeSharing),
                    max_clients: g.max_clients,
                }),
            };
        }
        if let Some(t) = &*self.time_slicing {
            return SharingMode::TimeSlicing {
                replicas: t.replicas,
                rename_by_default: t.rename_by_default.unwrap_or(false),
                fail_requests_greater_than_one: t.fail_requests_greater_than_one.unwrap_or(false),
            };
        }
        if let Some(m) = &*self.mps {
            return SharingMode::Mps {
                replicas: m.replicas,
                fail_requests_greater_than_one: m.fail_requests_greater_than_one.unwrap_or(true),
            };
        }
        SharingMode::None
    }

    /// The blocks of a mode, every optional attribute spelled out (as a plan fills them).
    pub fn of(mode: &SharingMode) -> Sharing {
        let mut s = Sharing::default();
        match mode {
            SharingMode::None => {}
            SharingMode::Mig {
                profile,
                strategy,
                gke_sharing,
            } => {
                s.mig = SingleBlock(Some(MigArgs {
                    profile: profile.clone(),
                    strategy: Some(strategy.as_str().to_string()),
                    gke_sharing: SingleBlock(gke_sharing.map(|g| GkeSharingArgs {
                        strategy: g.strategy.label_value().to_string(),
                        max_clients: g.max_clients,
                    })),
                }))
            }
            SharingMode::TimeSlicing {
                replicas,
                rename_by_default,
                fail_requests_greater_than_one,
            } => {
                s.time_slicing = SingleBlock(Some(TimeSlicingArgs {
                    replicas: *replicas,
                    rename_by_default: Some(*rename_by_default),
                    fail_requests_greater_than_one: Some(*fail_requests_greater_than_one),
                }))
            }
            SharingMode::Mps {
                replicas,
                fail_requests_greater_than_one,
            } => {
                s.mps = SingleBlock(Some(MpsArgs {
                    replicas: *replicas,
                    fail_requests_greater_than_one: Some(*fail_requests_greater_than_one),
                }))
            }
        }
        s
    }
}

tfplugin::object! {
    /// One entry of `taints`.
    pub struct TaintArgs {
        pub key: String,
        pub value: Option<String>,
        pub effect: String,
    }
}

impl TaintArgs {
    /// The domain's taint; None for an effect the schema's validator refuses anyway.
    pub fn taint(&self) -> Option<Taint> {
        Some(Taint {
            key: Cow::Owned(self.key.clone()),
            value: Cow::Owned(self.value.clone().unwrap_or_default()),
            effect: TaintEffect::parse(&self.effect)?,
        })
    }

    /// An empty value is written as null, as a user who gives none reads it back.
    pub fn of(key: &str, value: &str, effect: &str) -> TaintArgs {
        TaintArgs {
            key: key.to_string(),
            value: (!value.is_empty()).then(|| value.to_string()),
            effect: effect.to_string(),
        }
    }
}

/// The domain's taints of a `taints` attribute; None when it is not set (the pool gets the
/// default GPU taint).
pub fn taints(args: &Option<Vec<TaintArgs>>) -> Option<Vec<Taint>> {
    args.as_ref()
        .map(|list| list.iter().filter_map(TaintArgs::taint).collect())
}

tfplugin::object! {
    /// One entry of `tolerations`.
    pub struct TolerationOut {
        pub key: String,
        pub operator: String,
        pub value: Option<String>,
        pub effect: String,
    }
}

impl TolerationOut {
    pub fn all(tolerations: &[gpu::Toleration]) -> Vec<TolerationOut> {
        tolerations
            .iter()
            .map(|t| TolerationOut {
                key: t.key.clone(),
                operator: t.operator.as_str().to_string(),
                value: (!t.value.is_empty()).then(|| t.value.clone()),
                effect: t.effect.as_str().to_string(),
            })
            .collect()
    }
}

pub fn tolerations_attribute(description: &str) -> Attribute {
    Attribute::nested(
        "tolerations",
        Nesting::List,
        vec![
            Attribute::string("key").computed(),
            Attribute::string("operator")
                .computed()
                .describe("`Equal` or `Exists`."),
            Attribute::string("value").computed(),
            Attribute::string("effect").computed(),
        ],
    )
    .computed()
    .describe(description)
}

pub fn string_map(m: &std::collections::BTreeMap<String, String>) -> Value {
    Value::Map(
        m.iter()
            .map(|(k, v)| (k.clone(), Value::string(v.clone())))
            .collect(),
    )
}

/// The attribute path of a domain field: blocks are lists of one, so `mig.profile` is
/// `mig[0].profile`. `rename` maps fields whose attribute has another name on this surface.
pub fn field_path(field: Field, rename: &[(Field, &str)]) -> AttrPath {
    if let Some((_, name)) = rename.iter().find(|(f, _)| *f == field) {
        return AttrPath::parse(name);
    }
    let segments: Vec<&str> = field.path().split('.').collect();
    let mut path = AttrPath::root();
    for (i, s) in segments.iter().enumerate() {
        path = path.with_attr(s);
        if i + 1 < segments.len() {
            path = path.with_index(0);
        }
    }
    path
}

pub fn domain_diagnostic(e: &DomainError, rename: &[(Field, &str)]) -> Diagnostic {
    Diagnostic::error(e.summary, e.detail.clone()).at(field_path(e.field, rename))
}

// ---------------------------------------------------------------------------------------------
// The `kubernetes` block: the provider's default cluster access and a resource's own

/// The `kubernetes` block (the provider's, and `fracgpu_device_plugin_config`'s own).
pub fn kubernetes_block(description: &str) -> Block {
    let exec = Block::new(
        "A client-go credential plugin, as EKS (`aws eks get-token`), GKE \
        (`gke-gcloud-auth-plugin`) and AKS (`kubelogin`) hand out credentials.",
    )
    .attr(
        Attribute::string("api_version")
            .required()
            .describe("e.g. `client.authentication.k8s.io/v1beta1`."),
    )
    .attr(
        Attribute::string("command")
            .required()
            .describe("The plugin executable."),
    )
    .attr(
        Attribute::new("args", tfplugin::Type::list(tfplugin::Type::String))
            .optional()
            .describe("Its arguments."),
    )
    .attr(
        Attribute::new("env", tfplugin::Type::map(tfplugin::Type::String))
            .optional()
            .sensitive()
            .describe(
                "Extra environment variables for the plugin; sensitive, since they may carry \
            credentials.",
            ),
    );
    Block::new(description)
        .attr(
            Attribute::string("config_path").optional().describe(
                "Path of a kubeconfig file. Default: `KUBECONFIG`, then `~/.kube/config`.",
            ),
        )
        .attr(
            Attribute::string("config_context")
                .optional()
                .describe("Context of the kubeconfig. Default: its current context."),
        )
        .attr(Attribute::string("host").optional().describe(
            "API server URL, e.g. `https://1.2.3.4`; used with `token`, `exec` and \
            `cluster_ca_certificate` instead of a kubeconfig.",
        ))
        .attr(
            Attribute::string("token")
                .optional()
                .sensitive()
                .describe("Bearer token."),
        )
        .attr(
            Attribute::string("cluster_ca_certificate")
                .optional()
                .describe("PEM of the CA that signed the API server's certificate."),
        )
        .attr(
            Attribute::bool("insecure").optional().describe(
                "Skip verifying the API server's certificate (tests only). Default `false`.",
            ),
        )
        .single_block("exec", exec)
}

tfplugin::object! {
    /// The `exec` block of `kubernetes`.
    pub struct ExecArgs {
        pub api_version: Known<String>,
        pub command: Known<String>,
        pub args: Known<Vec<String>>,
        pub env: Known<BTreeMap<String, String>>,
    }
}

tfplugin::object! {
    /// The `kubernetes` block. Values not known yet read as unset, as before configuration.
    pub struct KubernetesArgs {
        pub config_path: Known<String>,
        pub config_context: Known<String>,
        pub host: Known<String>,
        pub token: Known<String>,
        pub cluster_ca_certificate: Known<String>,
        pub insecure: Known<bool>,
        pub exec: SingleBlock<ExecArgs>,
    }
}

impl KubernetesArgs {
    /// The attribute a connection failure is blamed on: the first of the block's ways to
    /// reach a cluster that is set (none set: the provider's own settings are used).
    pub fn access(&self) -> Option<&'static str> {
        [
            (self.host.is_some(), "kubernetes.0.host"),
            (self.config_path.is_some(), "kubernetes.0.config_path"),
            (self.config_context.is_some(), "kubernetes.0.config_context"),
            (self.exec.is_some(), "kubernetes.0.exec"),
        ]
        .into_iter()
        .find(|(set, _)| *set)
        .map(|(_, path)| path)
    }

    pub fn settings(&self) -> KubernetesSettings {
        KubernetesSettings {
            config_path: self.config_path.0.clone(),
            config_context: self.config_context.0.clone(),
            host: self.host.0.clone(),
            token: self.token.0.clone(),
            cluster_ca_certificate: self.cluster_ca_certificate.0.clone(),
            insecure: self.insecure.0,
            exec: self.exec.as_ref().map(|e| ExecSettings {
                api_version: e.api_version.0.clone().unwrap_or_default(),
                command: e.command.0.clone().unwrap_or_default(),
                args: e.args.0.clone().unwrap_or_default(),
                env: e.env.0.clone().unwrap_or_default(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tfplugin::object::{FromValue, ToValue};

    #[test]
    fn field_paths_index_blocks() {
        assert_eq!(
            field_path(Field::MigProfile, &[]).to_string(),
            "mig[0].profile"
        );
        assert_eq!(
            field_path(Field::MigGkeMaxClients, &[]).to_string(),
            "mig[0].gke_sharing[0].max_clients"
        );
        assert_eq!(
            field_path(Field::TimeSlicingReplicas, &[]).to_string(),
            "time_slicing[0].replicas"
        );
        assert_eq!(
            field_path(Field::MachineType, &[]).to_string(),
            "machine_type"
        );
        assert_eq!(
            field_path(Field::PoolName, &[(Field::PoolName, "pool_name")]).to_string(),
            "pool_name"
        );
    }

    #[test]
    fn sharing_blocks_read_into_the_domain() {
        let block = |name: &str, v: Value| Value::object([(name, Value::List(vec![v]))]);
        let ts = block(
            "time_slicing",
            Value::object([
                ("replicas", Value::int(10)),
                ("rename_by_default", Value::Bool(true)),
            ]),
        );
        assert_eq!(
            Sharing::from_value(&ts).ok().map(|s| s.mode()),
            Some(SharingMode::TimeSlicing {
                replicas: 10,
                rename_by_default: true,
                fail_requests_greater_than_one: false
            })
        );
        let mig = block(
            "mig",
            Value::object([
                ("profile", "1g.5gb".into()),
                (
                    "gke_sharing",
                    Value::List(vec![Value::object([
                        ("strategy", "mps".into()),
                        ("max_clients", Value::int(3)),
                    ])]),
                ),
            ]),
        );
        assert_eq!(
            Sharing::from_value(&mig).ok().map(|s| s.mode()),
            Some(SharingMode::Mig {
                profile: "1g.5gb".into(),
                strategy: MigStrategy::Mixed,
                gke_sharing: Some(GkeSharing {
                    strategy: GkeSharingStrategy::Mps,
                    max_clients: 3
                })
            })
        );
        assert_eq!(
            Sharing::from_value(&Value::object([("mps", Value::UNKNOWN)]))
                .ok()
                .map(|s| s.mode()),
            None
        );
        assert_eq!(
            Sharing::from_value(&Value::Object(Default::default()))
                .ok()
                .map(|s| s.mode()),
            Some(SharingMode::None)
        );
        // Written back with every optional spelled out, a mode reads as itself.
        for v in [&ts, &mig] {
            let mode = Sharing::from_value(v).unwrap().mode();
            assert_eq!(
                Sharing::from_value(&Sharing::of(&mode).to_value())
                    .unwrap()
                    .mode(),
                mode
            );
        }
    }
}
