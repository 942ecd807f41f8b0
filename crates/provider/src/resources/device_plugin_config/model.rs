//! The typed model of `fracgpu_device_plugin_config` and what it resolves to, [`Resolved`]: what
//! the configuration asks for (`desired`) and the delivery that takes it to the cluster
//! (`delivery`). The handlers read configurations, plans and states only through these models:
//! the arguments, what a plan defaults or leaves to the apply, what a state records the cluster
//! was given.

use std::collections::BTreeMap;

use crate::cluster::{KubernetesSettings, values};
use crate::model::KubernetesArgs;
use gpu::device_plugin::DevicePluginConfig;
use tfplugin::object::{DecodeError, FromValue, MaybeUnknown, SingleBlock, merge};
use tfplugin::{Diagnostics, Value};

use super::delivery::{Blocks, Delivery};
use super::desired::{ConfigArgs, Desired, resolve_configs};
use super::schema::{DEFAULT_NAME, DEFAULT_NAMESPACE};

tfplugin::object! {
    /// The arguments. `namespace`, `name` and `delivery` have plan-time defaults (the namespace
    /// depends on the delivery), filled before a plan is read; null in a configuration.
    pub struct Args {
        pub namespace: Option<String>,
        pub name: Option<String>,
        pub default_config: Option<String>,
        pub mig_strategy: Option<String>,
        pub delivery: Option<String>,
        pub kubernetes: SingleBlock<KubernetesArgs>,
        pub config: Vec<ConfigArgs>,
    }
    flatten {
        /// The deliveries' blocks (`helm`, `argocd`, ...), each read as its delivery's settings.
        pub blocks: Blocks,
    }
}

tfplugin::object! {
    /// What the resource computes.
    pub struct Computed {
        pub id: String,
        pub data: BTreeMap<String, String>,
        pub helm_values: String,
    }
}

tfplugin::object! {
    /// When this resource last restarted the device plugin: unknown in a plan that restarts it.
    pub struct Restarted {
        pub restarted_at: MaybeUnknown<Option<String>>,
    }
}

tfplugin::object! {
    /// The arguments a plan fills when the configuration leaves them null, as a configuration or
    /// plan holds them: unknown while they depend on another resource, and a GitOps delivery's
    /// namespace (the destination of the object that holds the values) until the apply reads it.
    pub struct Defaults {
        pub namespace: MaybeUnknown<Option<String>>,
        pub name: MaybeUnknown<Option<String>>,
        pub delivery: MaybeUnknown<Option<String>>,
    }
}

tfplugin::object! {
    /// The resource's ID: `namespace/name` of the ConfigMap, unknown while the namespace is.
    pub struct Identity {
        pub id: MaybeUnknown<String>,
    }
}

tfplugin::object! {
    /// What a state records the cluster was given; null until an apply or a read sets it.
    pub struct Delivered {
        pub data: Option<BTreeMap<String, String>>,
        pub helm_values: Option<String>,
    }
}

tfplugin::object! {
    /// A state, as a refresh and the next plan compare it with the cluster and the configuration.
    pub struct State {}
    flatten {
        pub args: Args,
        pub delivered: Delivered,
        pub restarted: Restarted,
    }
}

tfplugin::object! {
    /// The state `terraform import` starts from, which the read after it fills.
    pub struct Imported {
        pub timeouts: Value,
    }
    flatten {
        pub args: Args,
        pub identity: Identity,
    }
}

tfplugin::object! {
    /// The resource identity (terraform 1.12+): which ConfigMap, by namespace and name.
    pub struct ObjectIdentity {
        pub namespace: Option<String>,
        pub name: Option<String>,
    }
}

/// The last fix for a state that does not read.
pub(super) const REIMPORT: &str = "re-import it (`terraform import` with `namespace/name` of the ConfigMap, or \
    `<delivery>:<namespace>/<object>/<configmap>` for a delivery that writes an object)";

impl Args {
    /// The arguments of a plan; a namespace still unknown (see [`Defaults`]) reads as unset.
    pub(super) fn of_plan(planned: &Value) -> Result<Args, DecodeError> {
        let defaults = Defaults::from_value(planned)?;
        if defaults.namespace.is_known() {
            return Args::from_value(planned);
        }
        let mut known = planned.clone();
        merge(
            &mut known,
            &Defaults {
                namespace: MaybeUnknown::Known(None),
                ..defaults
            },
        );
        Args::from_value(&known)
    }

    pub(super) fn namespace(&self) -> &str {
        self.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE)
    }

    pub(super) fn name(&self) -> &str {
        self.name.as_deref().unwrap_or(DEFAULT_NAME)
    }

    /// The attribute that says how to reach the cluster, as `kubernetes.0.host`; None when the
    /// provider's block or the environment does.
    pub(super) fn access(&self) -> Option<&'static str> {
        self.kubernetes.as_ref().and_then(KubernetesArgs::access)
    }

    /// The resource's own cluster settings (empty: the provider's apply).
    pub(super) fn kubernetes(&self) -> KubernetesSettings {
        self.kubernetes
            .as_ref()
            .map(KubernetesArgs::settings)
            .unwrap_or_default()
    }

    fn desired(&self, configs: BTreeMap<String, DevicePluginConfig>) -> Desired {
        Desired {
            namespace: self.namespace().to_string(),
            name: self.name().to_string(),
            default: self.default_config.clone(),
            mig_strategy: self.mig_strategy.clone(),
            configs,
            kubernetes: self.kubernetes(),
            access: self.access(),
        }
    }
}

/// What a known configuration, plan or state asks for, and the delivery that takes it there.
pub(super) struct Resolved {
    pub desired: Desired,
    pub delivery: Delivery,
}

/// Resolves the arguments; problems become diagnostics on the attribute, `None` means the
/// configs cannot be delivered as written.
pub(super) fn resolve(args: &Args, diags: &mut Diagnostics) -> Option<Resolved> {
    let (configs, mut ok) = resolve_configs(
        &args.config,
        args.default_config.as_deref(),
        args.mig_strategy.as_deref(),
        diags,
    )?;
    let delivery = Delivery::select(args.delivery.as_deref(), &args.blocks, diags)?;
    let desired = args.desired(configs);
    ok &= delivery.life().check(&desired, diags);
    ok.then_some(Resolved { desired, delivery })
}

/// What a state asks for, as stored, for a refresh or a destroy: not checked again, so what an
/// apply wrote stays readable and removable (a config that no longer resolves is left out).
/// None when the delivery's block is gone.
pub(super) fn stored(args: &Args) -> Option<Resolved> {
    let delivery = Delivery::chosen(args.delivery.as_deref(), &args.blocks)?;
    let configs = resolve_configs(
        &args.config,
        args.default_config.as_deref(),
        args.mig_strategy.as_deref(),
        &mut Diagnostics::new(),
    )
    .map(|(configs, _)| configs)
    .unwrap_or_default();
    Some(Resolved {
        desired: args.desired(configs),
        delivery,
    })
}

impl Resolved {
    /// What the resource computes from what it asks for.
    pub(super) fn computed(&self) -> Computed {
        let d = &self.desired;
        Computed {
            id: format!("{}/{}", d.namespace, d.name),
            data: d.data(),
            helm_values: values::to_yaml(&self.delivery.life().chart_values(d)),
        }
    }
}

/// An unset value of the model, for a state built from nothing (import).
pub(super) fn null_state() -> Value {
    Value::null_object(&super::schema::schema().ty())
}
