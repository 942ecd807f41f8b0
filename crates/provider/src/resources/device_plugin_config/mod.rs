//! `fracgpu_device_plugin_config`: the NVIDIA device plugin's named sharing configs, delivered
//! through the GPU operator (a ConfigMap plus the ClusterPolicy pointer, the operator's Helm
//! release, or the GitOps object that installs it), with drift detection that compares meaning,
//! not YAML text. The handlers below, in the fixed order (schema, plan, create, read, update,
//! delete, import), stay short: the model lives in `model` (what the configs resolve to in
//! `desired`), each delivery in a file of `delivery` behind one trait, reading back in `observe`,
//! the bounded operations in `ops`; the Kubernetes work in `crate::cluster` and the documents in
//! `gpu`.

mod delivery;
mod desired;
mod diagnostics;
mod import;
mod listing;
mod model;
mod names;
mod observe;
mod ops;
mod resource;
mod schema;

use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;

use crate::cluster::{self as k, Cluster};
use tfplugin::api::{IdentityAttribute, IdentitySchema, PlanRequest, Private, Resource};
use tfplugin::object::{Decoded, FromValue, MaybeUnknown, ToValue, merge};
use tfplugin::plan::Planned;
use tfplugin::schema::Schema;
use tfplugin::{Diagnostic, Diagnostics, Type, Value};

use crate::operation::bounded;
use delivery::{At, Placement, Takeover};
use desired::Desired;
use diagnostics::kube_diagnostic;
use model::{
    Args, Defaults, Identity, Imported, ObjectIdentity, REIMPORT, Restarted, State, resolve,
};
use ops::Op;
use schema::{DEFAULT_NAME, DEFAULT_NAMESPACE, TIMEOUTS};

pub use delivery::DEFAULT_VALUES_PATH;
pub use listing::Listed;
pub use resource::{DevicePluginConfigResource, TYPE_NAME};
pub use schema::schema;

/// The values of `delivery`, in the registry's order.
pub fn deliveries() -> &'static [&'static str] {
    delivery::names()
}

impl DevicePluginConfigResource {
    /// A client for the cluster the resource's `kubernetes` block names, else the provider's.
    async fn connect(&self, args: &Args, diags: &mut Diagnostics) -> Option<Cluster> {
        let settings = args.kubernetes().or(&self.state.settings().kubernetes);
        match k::connect(&settings).await {
            Ok(c) => Some(c),
            Err(e) => {
                diags.push(kube_diagnostic("connect", args.access(), &e));
                None
            }
        }
    }

    /// What a delivery's steps work with on the cluster `connect` gave.
    fn at<'a>(&self, c: &'a Cluster, d: &'a Desired) -> At<'a> {
        At {
            cluster: c,
            desired: d,
            kubernetes: d.kubernetes.or(&self.state.settings().kubernetes),
        }
    }
}

/// Fills what depends on other arguments (the namespace follows the delivery), then what the
/// configs derive; the restart is planned only when something the cluster sees changes.
fn modify_plan(req: &PlanRequest<'_>, planned: &mut Planned, diags: &mut Diagnostics) {
    let st = &mut planned.state;
    if st.is_null() {
        return;
    }
    let (Some(set), Some(mut plan)) = (
        Defaults::from_value(req.config).or_report(diags),
        Defaults::from_value(st).or_report(diags),
    ) else {
        return;
    };
    // Null on create.
    let prior = Option::<State>::from_value(req.prior)
        .or_report_state(diags, REIMPORT)
        .flatten();
    let prior_ns = prior.as_ref().and_then(|p| p.args.namespace.clone());
    let namespace = match (delivery::placement(req.config, diags), prior_ns) {
        (Placement::In(ns), _) | (Placement::AtApply, Some(ns)) => MaybeUnknown::Known(Some(ns)),
        (Placement::AtApply, None) => MaybeUnknown::UNKNOWN,
        (Placement::Default, _) => MaybeUnknown::Known(Some(DEFAULT_NAMESPACE.to_string())),
    };
    let unset = MaybeUnknown::Known(None);
    if set.namespace == unset {
        plan.namespace = namespace;
    }
    if set.name == unset {
        plan.name = MaybeUnknown::Known(Some(DEFAULT_NAME.to_string()));
    }
    if set.delivery == unset {
        plan.delivery = MaybeUnknown::Known(Some(delivery::default_name().to_string()));
    }
    merge(st, &plan);
    let Some(args) = Args::of_plan(st).or_report_mismatch(diags) else {
        return;
    };
    let id = Identity {
        id: if plan.namespace.is_known() {
            MaybeUnknown::Known(format!("{}/{}", args.namespace(), args.name()))
        } else {
            MaybeUnknown::UNKNOWN
        },
    };
    merge(st, &id);
    // Validation already reported problems; here only the derived values.
    let Some(r) = resolve(&args, &mut Diagnostics::new()) else {
        return;
    };
    let computed = r.computed();
    // Nothing the cluster sees changes: no restart, keep the prior time.
    let kept = prior.filter(|p| {
        p.delivered.data.as_ref() == Some(&computed.data)
            && p.args.default_config == args.default_config
            && p.args.mig_strategy == args.mig_strategy
            && p.args.delivery == args.delivery
    });
    merge(st, &computed);
    // The computed ID names the default namespace while the real one is unknown.
    merge(st, &id);
    merge(
        st,
        &kept.map_or(
            Restarted {
                restarted_at: MaybeUnknown::UNKNOWN,
            },
            |p| p.restarted,
        ),
    );
}

#[async_trait]
impl Resource for DevicePluginConfigResource {
    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn schema(&self) -> Schema {
        schema()
    }

    fn validate(&self, config: &Value, diags: &mut Diagnostics) {
        if let Some(args) = Args::from_value(config).or_report_mismatch(diags) {
            resolve(&args, diags);
        }
    }

    async fn modify_plan(
        &self,
        req: &PlanRequest<'_>,
        planned: &mut Planned,
        diags: &mut Diagnostics,
    ) {
        modify_plan(req, planned, diags);
    }

    async fn create(
        &self,
        planned: &Value,
        private: &mut Private,
        diags: &mut Diagnostics,
    ) -> Value {
        let op = Op::start("create", planned, &self.state.stop);
        let mut inner = Diagnostics::new();
        let writing = AtomicBool::new(false);
        let mut taken = Takeover::default();
        let out = op
            .run(self.do_create(planned, &mut taken, &mut inner, &writing, op.limit()))
            .await;
        op.end(out.as_ref().err().copied(), inner, diags);
        taken.store(private);
        match out {
            Ok(st) => st,
            // Before the write began, whatever the cluster holds under that name is not ours.
            Err(cut) if writing.load(Ordering::Relaxed) => {
                self.written_before_cut(planned, cut.look_limit()).await
            }
            Err(_) => Value::Null,
        }
    }

    async fn read(&self, state: &Value, _: &mut Private, diags: &mut Diagnostics) -> Option<Value> {
        let limit = TIMEOUTS.of(state, "read");
        let read = bounded(limit, &self.state.stop, self.do_read(state, diags)).await;
        read.unwrap_or_else(|cut| {
            diags.push(cut.diagnostic("read", limit));
            None
        })
    }

    async fn update(
        &self,
        prior: &Value,
        planned: &Value,
        private: &mut Private,
        diags: &mut Diagnostics,
    ) -> Value {
        let op = Op::start("update", planned, &self.state.stop);
        let mut inner = Diagnostics::new();
        let mut taken = Takeover::load(private);
        let out = op
            .run(self.do_update(prior, planned, &mut taken, &mut inner, op.limit()))
            .await;
        op.end(out.as_ref().err().copied(), inner, diags);
        taken.store(private);
        out.unwrap_or_else(|_| prior.clone())
    }

    async fn delete(&self, state: &Value, private: &Private, diags: &mut Diagnostics) {
        let op = Op::start("delete", state, &self.state.stop);
        let mut inner = Diagnostics::new();
        let taken = Takeover::load(private);
        let out = op
            .run(self.do_delete(state, &taken, &mut inner, op.limit()))
            .await;
        op.end(out.err(), inner, diags);
    }

    async fn import(&self, id: &str, diags: &mut Diagnostics) -> Option<Value> {
        let args = match import::args(id) {
            Ok(a) => a,
            Err(detail) => {
                diags.push(Diagnostic::error("Invalid import ID", detail));
                return None;
            }
        };
        // A skeleton the read after import fills from the cluster (a GitOps object's
        // destination, and the ID with it, included).
        let mut st = model::null_state();
        merge(
            &mut st,
            &Imported {
                timeouts: Value::List(vec![]),
                args,
                identity: Identity {
                    id: MaybeUnknown::Known(id.to_string()),
                },
            },
        );
        Some(st)
    }

    fn identity_schema(&self) -> Option<IdentitySchema> {
        let attr = |name, description| IdentityAttribute {
            name,
            ty: Type::String,
            required_for_import: true,
            optional_for_import: false,
            description,
        };
        Some(IdentitySchema {
            version: 0,
            attributes: vec![
                attr("namespace", "Namespace of the ConfigMap."),
                attr("name", "Name of the ConfigMap."),
            ],
        })
    }

    fn identity(&self, state: &Value) -> Option<Value> {
        // None while a plan leaves the namespace unknown; a state that does not fit is
        // reported by read and plan.
        let at = Defaults::from_value(state).ok()?;
        let known = |v: MaybeUnknown<Option<String>>| v.known().cloned().flatten();
        let identity = ObjectIdentity {
            namespace: Some(known(at.namespace)?),
            name: Some(known(at.name)?),
        };
        Some(identity.to_value())
    }

    async fn import_identity(&self, given: &Value, diags: &mut Diagnostics) -> Option<Value> {
        let given = ObjectIdentity::from_value(given).or_report(diags)?;
        let part = |p: Option<String>| p.unwrap_or_default();
        // The identity names the ConfigMap alone: the cluster says which delivery writes it.
        let namespace = part(given.namespace);
        let id = self
            .identity_import_id(&namespace, &part(given.name), diags)
            .await;
        let mut st = self.import(&id, diags).await?;
        // A GitOps delivery's ID leaves the namespace to the read (the object's destination);
        // the identity names it already, and terraform wants the identity back from the import.
        if Defaults::from_value(&st).is_ok_and(|d| d.namespace.known().is_none_or(Option::is_none))
        {
            merge(
                &mut st,
                &Value::object([("namespace", Value::string(&namespace))]),
            );
        }
        Some(st)
    }
}

#[cfg(test)]
mod tests {
    use super::delivery::{ArgoArgs, FluxArgs, HelmArgs};
    use super::desired::{ConfigArgs, config_blocks, reconcile};
    use super::model::{Args, Computed, Restarted};
    use super::*;
    use gpu::{self, SharingMode};
    use std::collections::BTreeMap;
    use tfplugin::object::ToValue;

    fn set(v: &mut Value, k: &str, new: Value) {
        if let Value::Object(m) = v {
            m.insert(k.to_string(), new);
        }
    }

    fn resolve(v: &Value, diags: &mut Diagnostics) -> Option<Desired> {
        Args::from_value(v)
            .ok()
            .and_then(|a| model::resolve(&a, diags))
            .map(|r| r.desired)
    }

    /// Types and flags, the config, kubernetes and every delivery's block included: the
    /// arguments as a plan holds them, and a state as the arguments and what was delivered and
    /// restarted.
    #[test]
    fn the_models_read_what_the_schema_declares() {
        use tfplugin::shape::{Reads, Shaped, check, object};
        let block = schema().block;
        let at = "fracgpu_device_plugin_config";
        assert_eq!(
            check(at, &block, &Args::shape(), Reads::Plan),
            Vec::<String>::new()
        );
        let state = object(
            vec![("timeouts", Value::shape())],
            vec![Args::shape(), Computed::shape(), Restarted::shape()],
        );
        assert_eq!(
            check(at, &block, &state, Reads::State),
            Vec::<String>::new()
        );
    }

    #[test]
    fn the_models_name_what_the_schema_declares() {
        let block = schema().block;
        let mut names = Args::attribute_names();
        names.extend(Computed::attribute_names());
        names.extend(Restarted::attribute_names());
        names.push("timeouts");
        names.sort_unstable();
        assert_eq!(names, block.names());
        let nested = |n: &str| block.nested_block(n).unwrap().block.names();
        assert_eq!(ConfigArgs::attribute_names(), nested("config"));
        assert_eq!(HelmArgs::attribute_names(), nested("helm"));
        assert_eq!(ArgoArgs::attribute_names(), nested("argocd"));
        assert_eq!(FluxArgs::attribute_names(), nested("flux"));
        assert_eq!(
            crate::model::KubernetesArgs::attribute_names(),
            nested("kubernetes")
        );
    }

    fn cfg(name: &str, extra: Vec<(&str, Value)>) -> Value {
        let mut m: BTreeMap<String, Value> = [
            ("name", Value::string(name)),
            ("yaml", Value::Null),
            ("shared_devices_allocation_policy", Value::Null),
            ("mig", Value::List(vec![])),
            ("time_slicing", Value::List(vec![])),
            ("mps", Value::List(vec![])),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        for (k, v) in extra {
            m.insert(k.to_string(), v);
        }
        Value::Object(m)
    }

    fn resource(configs: Vec<Value>, extra: Vec<(&str, Value)>) -> Value {
        let ty = schema().ty();
        let mut v = Value::null_object(&ty);
        set(&mut v, "config", Value::List(configs));
        for b in ["kubernetes", "helm", "argocd", "flux"] {
            set(&mut v, b, Value::List(vec![]));
        }
        for (k, x) in extra {
            set(&mut v, k, x);
        }
        v
    }

    fn ts(replicas: i64) -> Value {
        Value::List(vec![Value::object([
            ("replicas", Value::int(replicas)),
            ("rename_by_default", Value::Bool(true)),
            ("fail_requests_greater_than_one", Value::Bool(false)),
        ])])
    }

    #[test]
    fn a_node_pools_yaml_plugs_straight_in() {
        let mode = SharingMode::TimeSlicing {
            replicas: 10,
            rename_by_default: false,
            fail_requests_greater_than_one: false,
        };
        let named = gpu::device_plugin_config(&mode).unwrap();
        let yaml = gpu::device_plugin_config_yaml(&mode).unwrap();
        let v = resource(
            vec![cfg(
                &named.name,
                vec![("yaml", Value::string(yaml.clone()))],
            )],
            vec![],
        );
        let mut diags = Diagnostics::new();
        let d = resolve(&v, &mut diags).expect("resolves");
        assert!(diags.is_empty());
        assert_eq!(d.data()[&named.name], yaml, "the pool's text is kept as is");
    }

    #[test]
    fn semantic_reconcile_keeps_our_text_for_the_same_meaning() {
        let ours = BTreeMap::from([(
            "ts".to_string(),
            "version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: false\n    failRequestsGreaterThanOne: false\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n".to_string(),
        )]);
        let same = BTreeMap::from([(
            "ts".to_string(),
            "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 4}]}}\nversion: v1\n"
                .to_string(),
        )]);
        assert_eq!(reconcile(&ours, &same), ours);
        let other = BTreeMap::from([("ts".to_string(), same["ts"].replace('4', "5"))]);
        assert_eq!(reconcile(&ours, &other), other);
        let extra = BTreeMap::from([
            ("ts".to_string(), ours["ts"].clone()),
            ("new".to_string(), String::new()),
        ]);
        assert_eq!(reconcile(&ours, &extra).len(), 2, "unknown keys are drift");
    }

    #[test]
    fn import_rebuilds_blocks_that_read_back_equal() {
        let v = resource(
            vec![
                cfg("all", vec![]),
                cfg(
                    "mps-4",
                    vec![(
                        "mps",
                        Value::List(vec![Value::object([
                            ("replicas", Value::int(4)),
                            ("fail_requests_greater_than_one", Value::Bool(true)),
                        ])]),
                    )],
                ),
                cfg("ts", vec![("time_slicing", ts(10))]),
            ],
            vec![],
        );
        let mut diags = Diagnostics::new();
        let d = resolve(&v, &mut diags).unwrap();
        let blocks = config_blocks(&d.data());
        let again = model::resolve(
            &Args {
                config: blocks.clone(),
                ..Args::default()
            },
            &mut diags,
        )
        .unwrap()
        .desired;
        assert_eq!(again.configs, d.configs);
        assert_eq!(blocks.to_value(), v.get("config").clone());
    }

    #[test]
    fn the_allocation_policy_is_written_refused_without_sharing_and_imported() {
        let packed = ("shared_devices_allocation_policy", Value::string("packed"));
        let v = resource(
            vec![cfg("ts", vec![("time_slicing", ts(4)), packed.clone()])],
            vec![],
        );
        let mut diags = Diagnostics::new();
        let d = resolve(&v, &mut diags).unwrap();
        assert!(
            d.data()["ts"].contains("  plugin:\n    sharedDevicesAllocationPolicy: packed\n"),
            "{}",
            d.data()["ts"]
        );
        // Import spells it as the block's attribute again.
        assert_eq!(config_blocks(&d.data()).to_value(), v.get("config").clone());
        // Whole GPUs have no replicas to pick among; a yaml that says otherwise conflicts.
        for (extra, words) in [
            (vec![packed.clone()], "shares no GPU"),
            (
                vec![
                    packed.clone(),
                    (
                        "yaml",
                        Value::string(
                            "version: v1\nflags:\n  plugin:\n    sharedDevicesAllocationPolicy: \
                            distributed\nsharing:\n  timeSlicing:\n    resources:\n    - name: \
                            nvidia.com/gpu\n      replicas: 2\n",
                        ),
                    ),
                ],
                "set it in one place",
            ),
        ] {
            let v = resource(vec![cfg("x", extra)], vec![]);
            let mut diags = Diagnostics::new();
            assert!(resolve(&v, &mut diags).is_none());
            let d = &diags.0[0];
            assert!(d.detail.contains(words), "{}", d.detail);
            assert_eq!(
                d.path.as_ref().map(ToString::to_string).as_deref(),
                Some("config[0].shared_devices_allocation_policy")
            );
        }
    }

    #[test]
    fn helm_values_nest_under_values_path_with_the_strategy_beside() {
        let v = resource(
            vec![cfg("ts", vec![("time_slicing", ts(10))])],
            vec![
                ("default_config", Value::string("ts")),
                ("mig_strategy", Value::string("single")),
            ],
        );
        let d = resolve(&v, &mut Diagnostics::new()).unwrap();
        let vals = d.helm_values("op.devicePlugin");
        assert_eq!(vals["op"]["devicePlugin"]["config"]["default"], "ts");
        assert_eq!(vals["op"]["devicePlugin"]["config"]["create"], true);
        assert_eq!(
            vals["op"]["devicePlugin"]["config"]["data"]
                .as_object()
                .map(|m| m.keys().collect::<Vec<_>>()),
            Some(vec![&"ts".to_string()]),
            "only the configured keys, no nulls"
        );
        assert_eq!(vals["op"]["mig"]["strategy"], "single");
        let root = d.helm_values("devicePlugin");
        assert_eq!(root["mig"]["strategy"], "single");
        assert_eq!(
            d.helm_owned("devicePlugin")
                .into_iter()
                .map(|(p, _)| p)
                .collect::<Vec<_>>(),
            ["devicePlugin.config", "mig.strategy"]
        );
    }

    #[test]
    fn unknown_configs_resolve_to_nothing_yet() {
        let v = resource(vec![cfg("x", vec![("yaml", Value::UNKNOWN)])], vec![]);
        let mut diags = Diagnostics::new();
        assert!(resolve(&v, &mut diags).is_none());
        assert!(diags.is_empty());
    }

    #[test]
    fn access_attribute_follows_what_is_set() {
        let kube = |k: &str| {
            resource(
                vec![],
                vec![(
                    "kubernetes",
                    Value::List(vec![Value::object([(k, Value::string("x"))])]),
                )],
            )
        };
        let access = |v: &Value| Args::from_value(v).unwrap().access();
        assert_eq!(access(&kube("host")), Some("kubernetes.0.host"));
        assert_eq!(
            access(&kube("config_path")),
            Some("kubernetes.0.config_path")
        );
        assert_eq!(access(&resource(vec![], vec![])), None);
    }

    /// The plan of `config` over `prior` (null on create), as terraform and the framework give
    /// it to the hook, and the hook's diagnostics.
    fn plan_of(config: &Value, prior: &Value) -> (Value, Diagnostics) {
        let mut planned = tfplugin::plan::plan(&schema().block, prior, config, config);
        let mut diags = Diagnostics::new();
        modify_plan(&PlanRequest { prior, config }, &mut planned, &mut diags);
        (planned.state, diags)
    }

    #[test]
    fn the_plan_fills_the_defaults_and_leaves_a_gitops_namespace_to_the_apply() {
        let configs = || vec![cfg("ts", vec![("time_slicing", ts(4))])];
        let (plan, diags) = plan_of(&resource(configs(), vec![]), &Value::Null);
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(plan.get("namespace"), &Value::string(DEFAULT_NAMESPACE));
        assert_eq!(plan.get("name"), &Value::string(DEFAULT_NAME));
        assert_eq!(plan.get("delivery"), &Value::string("cluster_policy"));
        assert_eq!(
            plan.get("id"),
            &Value::string(format!("{DEFAULT_NAMESPACE}/{DEFAULT_NAME}"))
        );
        assert!(plan.get("data").is_fully_known());
        assert!(!plan.get("restarted_at").is_known(), "a create restarts");

        let flux = || {
            resource(
                configs(),
                vec![
                    ("delivery", Value::string("flux")),
                    (
                        "flux",
                        Value::List(vec![Value::object([
                            ("helm_release", Value::string("gpu-operator")),
                            ("namespace", Value::Null),
                            ("values_path", Value::Null),
                        ])]),
                    ),
                ],
            )
        };
        let (plan, diags) = plan_of(&flux(), &Value::Null);
        assert!(diags.is_empty(), "{diags:?}");
        assert!(!plan.get("namespace").is_known());
        assert!(!plan.get("id").is_known());
        assert!(
            plan.get("data").is_fully_known(),
            "the configs derive anyway"
        );

        // Applied: the namespace read from the object is kept, and so is the restart time
        // while nothing the cluster sees changes.
        let mut state = plan.unknowns_as_null();
        set(&mut state, "namespace", Value::string("operators"));
        set(
            &mut state,
            "id",
            Value::string("operators/time-slicing-config"),
        );
        set(
            &mut state,
            "restarted_at",
            Value::string("2025-01-01T00:00:00Z"),
        );
        let (again, diags) = plan_of(&flux(), &state);
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(again.get("namespace"), &Value::string("operators"));
        assert_eq!(again.get("id"), state.get("id"));
        assert_eq!(again.get("restarted_at"), state.get("restarted_at"));
    }

    #[test]
    fn an_unknown_configuration_plans_quietly_and_a_mismatch_names_its_attribute() {
        let unknown = resource(vec![cfg("x", vec![("yaml", Value::UNKNOWN)])], vec![]);
        let mut diags = Diagnostics::new();
        DevicePluginConfigResource::new(Default::default()).validate(&unknown, &mut diags);
        assert!(diags.is_empty(), "{diags:?}");
        let (plan, diags) = plan_of(&unknown, &Value::Null);
        assert!(diags.is_empty(), "{diags:?}");
        assert!(!plan.get("data").is_known(), "left to the apply");

        let nameless = resource(vec![cfg("x", vec![("name", Value::Null)])], vec![]);
        let mut diags = Diagnostics::new();
        DevicePluginConfigResource::new(Default::default()).validate(&nameless, &mut diags);
        assert_eq!(diags.0.len(), 1, "{diags:?}");
        assert_eq!(diags.0[0].summary, "Unexpected value");
        assert_eq!(
            diags.0[0].path.as_ref().map(ToString::to_string).as_deref(),
            Some("config[0].name")
        );
    }

    #[tokio::test]
    async fn a_state_that_does_not_fit_is_unreadable_on_its_attribute() {
        let replicas = Value::Number(tfplugin::Number::Float(2.5));
        let mut state = resource(
            vec![cfg(
                "ts",
                vec![(
                    "time_slicing",
                    Value::List(vec![Value::object([
                        ("replicas", replicas),
                        ("rename_by_default", Value::Bool(false)),
                        ("fail_requests_greater_than_one", Value::Bool(false)),
                    ])]),
                )],
            )],
            vec![],
        );
        set(&mut state, "namespace", Value::string(DEFAULT_NAMESPACE));
        set(&mut state, "name", Value::string(DEFAULT_NAME));
        let r = DevicePluginConfigResource::new(Default::default());
        let mut diags = Diagnostics::new();
        assert_eq!(
            r.read(&state, &mut Private::default(), &mut diags).await,
            None
        );
        assert_eq!(diags.0.len(), 1, "{diags:?}");
        let d = &diags.0[0];
        assert_eq!(d.summary, "Unreadable state");
        assert_eq!(
            d.path.as_ref().map(ToString::to_string).as_deref(),
            Some("config[0].time_slicing[0].replicas")
        );
        assert!(
            d.detail
                .contains("should be a whole number from 0 to 4294967295, but is the number 2.5")
                && d.detail
                    .contains("`terraform import` with `namespace/name`"),
            "{}",
            d.detail
        );
    }
}
