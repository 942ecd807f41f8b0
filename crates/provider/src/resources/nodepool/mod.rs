//! `fracgpu_nodepool`: a GPU node pool on AKS, GKE or EKS, prepared for sharing by MIG,
//! time-slicing or MPS. The handlers below, in the fixed order (schema, plan, create, read,
//! update, delete, import), stay short: the model and its conversions live in `model`, the plan
//! beyond the schema in `plan`, what a failed operation keeps in `failure`, the cloud work in
//! `crate::cloud` and the sharing rules in the `gpu` crate.

pub mod discovery;
mod failure;
mod import;
mod model;
mod plan;
mod schema;
mod state;

use std::sync::Arc;

use async_trait::async_trait;

use crate::cloud::{self, Location};
use crate::operation::OpCtx;
use crate::state::{ProviderState, Settings};
use tfplugin::api::{IdentitySchema, PlanRequest, Private, Resource};
use tfplugin::object::{Decoded, FromValue, Known, ToValue};
use tfplugin::plan::Planned;
use tfplugin::schema::Schema;
use tfplugin::{Diagnostic, Diagnostics, Value};

use failure::{cloud_diagnostic, may_have_created, read_after_failure};
use model::{Args, REIMPORT, resolve};
use schema::TIMEOUTS;
use state::{state_from_pool, unread_pool};

pub use import::{identity, identity_schema, parse_identity, parse_import_id};
pub use schema::schema;

pub const TYPE_NAME: &str = "fracgpu_nodepool";

/// The state `terraform import` gives a pool the cloud reported; None (with diagnostics that say
/// why) for a pool this resource cannot manage, such as one without GPUs.
pub fn state_of_pool(
    pool: &cloud::Pool,
    settings: &Settings,
    diags: &mut Diagnostics,
) -> Option<Value> {
    state_from_pool(pool, &Value::Null, settings, diags)
}

/// How the pool a state describes shares its GPUs.
pub fn sharing_of_state(state: &Value) -> Option<gpu::SharingMode> {
    match Args::from_value(state) {
        Ok(a) => Some(a.sharing.mode()),
        Err(e) => {
            // Only states this provider made come here: the model disagrees with them.
            tracing::error!(error = %e, "a node pool state does not read back");
            None
        }
    }
}

pub struct NodePool {
    state: Arc<ProviderState>,
}

impl NodePool {
    pub fn new(state: Arc<ProviderState>) -> NodePool {
        NodePool { state }
    }

    fn ctx(&self, v: &Value, op: &str) -> OpCtx {
        OpCtx::new(TIMEOUTS.of(v, op), self.state.stop.clone())
    }

    async fn client(
        &self,
        loc: &Location,
        diags: &mut Diagnostics,
    ) -> Option<Arc<dyn cloud::NodePools>> {
        match self.state.node_pools(loc.cloud()).await {
            Ok(c) => Some(c),
            Err(e) => {
                diags.push(Diagnostic::error(
                    "Cloud client unavailable",
                    format!(
                        "Could not set up the {} client: {e}. Configure the provider's \
                        credentials for it (or `sandbox`).",
                        loc.target().title()
                    ),
                ));
                None
            }
        }
    }

    /// A pool whose plan could not read its cluster's zones (GKE's default `node_locations`)
    /// gets them now, so that a node count left to its default is one per zone and a total is
    /// checked against them. False when they cannot be read (with the diagnostic).
    async fn zones_now(
        &self,
        args: &mut Args,
        planned: &Value,
        settings: &Settings,
        diags: &mut Diagnostics,
    ) -> bool {
        let Some(attr) = args.target.target().and_then(|t| t.zones_attr()) else {
            return true;
        };
        if args.zones().is_some() {
            return true;
        }
        let Some(loc) = args.location(settings, diags) else {
            return false;
        };
        let Some(client) = self.client(&loc, diags).await else {
            return false;
        };
        match client
            .default_zones(&loc, &self.ctx(planned, "create"))
            .await
        {
            Ok(zones) => {
                if let Some(Value::Object(block)) = args.target.block_mut() {
                    block.insert(attr.to_string(), Known(zones).to_value());
                }
                true
            }
            Err(e) => {
                diags.push(cloud_diagnostic("create", &args.name, &e));
                false
            }
        }
    }

    /// A write to the cluster at `loc`: its refresh snapshot is dropped before and after, so no
    /// read that follows sees the cluster as it was.
    async fn writing<T>(&self, loc: &Location, write: impl Future<Output = T>) -> T {
        self.state.shared_reads.forget(loc);
        let out = write.await;
        self.state.shared_reads.forget(loc);
        out
    }

    /// The arguments of a state: it is known, so only a state this provider cannot read fails,
    /// and that is an error (a read that returned nothing would make terraform forget the pool).
    fn args_of_state(state: &Value, diags: &mut Diagnostics) -> Option<Args> {
        Args::from_value(state).or_report_state(diags, REIMPORT)
    }
}

/// The pool as the last refresh saw it (the prior state), for a client that reads it again
/// itself (`NodePools::update_reads_the_pool`); None when the state does not resolve.
fn refreshed_pool(prior: &Value, settings: &Settings) -> Option<cloud::Pool> {
    let args = Args::from_value(prior).ok()?;
    let r = resolve(&args, settings, &mut Diagnostics::new())?;
    Some(cloud::Pool {
        id: prior.get("id").as_str()?.to_string(),
        spec: r.spec,
        status: prior.get("status").as_str().unwrap_or_default().to_string(),
    })
}

/// Stands in for provider defaults during validation, which runs before the provider is
/// configured: a missing subscription, project or region is reported at plan time instead.
fn validation_settings() -> Settings {
    Settings {
        cloud: cloud::CloudSettings::with_scope("validation"),
        ..Settings::default()
    }
}

#[async_trait]
impl Resource for NodePool {
    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn schema(&self) -> Schema {
        schema()
    }

    fn validate(&self, config: &Value, diags: &mut Diagnostics) {
        if let Some(args) = Args::from_value(config).or_report_mismatch(diags) {
            resolve(&args, &validation_settings(), diags);
        }
        plan::warn_on_target(config, diags);
    }

    async fn modify_plan(
        &self,
        req: &PlanRequest<'_>,
        planned: &mut Planned,
        diags: &mut Diagnostics,
    ) {
        plan::modify(req, planned, &self.state, diags).await;
    }

    async fn create(&self, planned: &Value, _: &mut Private, diags: &mut Diagnostics) -> Value {
        let settings = self.state.settings();
        let Some(mut args) = Args::from_value(planned).or_report(diags) else {
            return Value::Null;
        };
        if !self.zones_now(&mut args, planned, &settings, diags).await {
            return Value::Null;
        }
        let Some(r) = resolve(&args, &settings, diags) else {
            return Value::Null;
        };
        let Some(client) = self.client(&r.spec.location, diags).await else {
            return Value::Null;
        };
        let (ctx, spec) = (self.ctx(planned, "create"), &r.spec);
        let cloud = spec.location.cloud().as_str();
        tracing::info!(cloud, pool = %spec.name, machine_type = %spec.machine_type, "creating node pool");
        let created = self
            .writing(&spec.location, client.create(spec, &ctx))
            .await;
        let e = match created {
            Ok(mut pool) => {
                tracing::info!(cloud, pool = %spec.name, elapsed_ms = ctx.started.elapsed().as_millis() as u64, "node pool created");
                if pool.spec.node_template != spec.node_template {
                    // The pool exists; only the autoscaler's template is missing. An error would
                    // taint (and so replace) the pool: a warning, and the plan's value, which the
                    // next refresh corrects from the cloud, so the next plan shows the change.
                    diags.push(Diagnostic::warning(
                        "Node template not written",
                        format!(
                            "Node pool {} was created, but the tags cluster-autoscaler reads to \
                             scale it from zero (autoscaler_node_template) could not be written. \
                             Check that the credentials may write them (on EKS: \
                             autoscaling:DescribeAutoScalingGroups, autoscaling:CreateOrUpdateTags \
                             and autoscaling:DeleteTags); TF_LOG=warn shows the cause. The next \
                             plan shows the template as a change, and the next apply writes it.",
                            spec.name
                        ),
                    ));
                    pool.spec.node_template = spec.node_template.clone();
                }
                return state_from_pool(&pool, planned, &settings, diags).unwrap_or(Value::Null);
            }
            Err(e) => e,
        };
        tracing::warn!(cloud, pool = %spec.name, error = %e, "node pool create failed");
        diags.push(cloud_diagnostic("create", &spec.name, &e));
        // A refused create made nothing: a pool of that name is someone else's (the clients
        // adopt their own earlier attempts), and taking it into state, tainted, would have the
        // next apply destroy it. Whatever this create made is kept in state (tainted).
        if !may_have_created(&e) {
            return Value::Null;
        }
        match read_after_failure(client.as_ref(), &spec.location, &spec.name, &e).await {
            Some(Some(pool)) => {
                state_from_pool(&pool, planned, &settings, diags).unwrap_or(Value::Null)
            }
            Some(None) => Value::Null,
            // The cloud could not say: keep the pool as planned (tainted). The next refresh drops
            // it if it is not there, whereas a pool left out of state would be orphaned.
            None => unread_pool(planned, spec),
        }
    }

    async fn read(&self, state: &Value, _: &mut Private, diags: &mut Diagnostics) -> Option<Value> {
        let settings = self.state.settings();
        let args = Self::args_of_state(state, diags)?;
        let loc = args.location(&settings, diags)?;
        let client = self.client(&loc, diags).await?;
        tracing::debug!(cloud = loc.cloud().as_str(), pool = %args.name, "reading node pool");
        let ctx = self.ctx(state, "read");
        let read = if loc.target().shares_reads() {
            let shared = &self.state.shared_reads;
            shared.read(client.as_ref(), &loc, &args.name, &ctx).await
        } else {
            client.get(&loc, &args.name, &ctx).await
        };
        match read {
            Ok(Some(pool)) => state_from_pool(&pool, state, &settings, diags),
            Ok(None) => {
                tracing::info!(cloud = loc.cloud().as_str(), pool = %args.name, "node pool no \
                    longer exists; dropping it from state");
                None
            }
            Err(e) => {
                diags.push(cloud_diagnostic("read", &args.name, &e));
                None
            }
        }
    }

    async fn update(
        &self,
        prior: &Value,
        planned: &Value,
        _: &mut Private,
        diags: &mut Diagnostics,
    ) -> Value {
        let settings = self.state.settings();
        let Some(r) = Args::from_value(planned)
            .or_report(diags)
            .and_then(|a| resolve(&a, &settings, diags))
        else {
            return prior.clone();
        };
        let Some(client) = self.client(&r.spec.location, diags).await else {
            return prior.clone();
        };
        let (ctx, spec) = (self.ctx(planned, "update"), &r.spec);
        let vanished = |diags: &mut Diagnostics| {
            diags.push(Diagnostic::error(
                "Node pool vanished",
                format!(
                    "Node pool {:?} no longer exists; run `terraform apply` again to create it.",
                    spec.name
                ),
            ));
        };
        // A client whose update reads the pool first needs no read of ours: one round trip
        // less per pool, and its decision rests on its own read all the same.
        let refreshed = client
            .update_reads_the_pool()
            .then(|| refreshed_pool(prior, &settings))
            .flatten();
        let current = match refreshed {
            Some(p) => p,
            None => match client.get(&spec.location, &spec.name, &ctx).await {
                Ok(Some(p)) => p,
                Ok(None) => {
                    vanished(diags);
                    return prior.clone();
                }
                Err(e) => {
                    diags.push(cloud_diagnostic("read", &spec.name, &e));
                    return prior.clone();
                }
            },
        };
        let cloud = spec.location.cloud().as_str();
        tracing::info!(cloud, pool = %spec.name, "updating node pool in place");
        let updated = self
            .writing(&spec.location, client.update(&current, spec, &ctx))
            .await;
        let e = match updated {
            Ok(pool) => {
                tracing::info!(cloud, pool = %spec.name, elapsed_ms = ctx.started.elapsed().as_millis() as u64, "node pool updated");
                return state_from_pool(&pool, planned, &settings, diags)
                    .unwrap_or_else(|| prior.clone());
            }
            Err(e) => e,
        };
        tracing::warn!(cloud, pool = %spec.name, error = %e, "node pool update failed");
        if client.update_reads_the_pool() && e.is_not_found() {
            vanished(diags);
            return prior.clone();
        }
        diags.push(cloud_diagnostic("update", &spec.name, &e));
        // Record what the cloud now holds, so the next plan shows what is left to do.
        match read_after_failure(client.as_ref(), &spec.location, &spec.name, &e).await {
            Some(Some(pool)) => {
                state_from_pool(&pool, prior, &settings, diags).unwrap_or_else(|| prior.clone())
            }
            _ => prior.clone(),
        }
    }

    async fn delete(&self, state: &Value, _: &Private, diags: &mut Diagnostics) {
        let settings = self.state.settings();
        let Some(args) = Self::args_of_state(state, diags) else {
            return;
        };
        let Some(loc) = args.location(&settings, diags) else {
            return;
        };
        let Some(client) = self.client(&loc, diags).await else {
            return;
        };
        let (ctx, name) = (self.ctx(state, "delete"), args.name.as_str());
        tracing::info!(
            cloud = loc.cloud().as_str(),
            pool = name,
            "deleting node pool"
        );
        match self.writing(&loc, client.delete(&loc, name, &ctx)).await {
            Ok(()) => tracing::info!(
                cloud = loc.cloud().as_str(),
                pool = name,
                elapsed_ms = ctx.started.elapsed().as_millis() as u64,
                "node pool deleted"
            ),
            Err(e) => {
                tracing::warn!(cloud = loc.cloud().as_str(), pool = name, error = %e, "node pool delete failed");
                diags.push(cloud_diagnostic("delete", name, &e));
            }
        }
    }

    async fn import(&self, id: &str, diags: &mut Diagnostics) -> Option<Value> {
        let settings = self.state.settings();
        let Some((loc, name)) = parse_import_id(id, &settings) else {
            diags.push(Diagnostic::error(
                "Invalid import ID",
                format!(
                    "{id:?} is not a node pool ID. Use the cloud's own ID: {}.",
                    cloud::registry::import_id_forms()
                ),
            ));
            return None;
        };
        self.import_at(&loc, &name, &settings, diags).await
    }

    fn identity_schema(&self) -> Option<IdentitySchema> {
        Some(identity_schema())
    }

    /// From the state's own coordinates; the provider's defaults fill what the state leaves
    /// out, as they do for every call to the cloud.
    fn identity(&self, state: &Value) -> Option<Value> {
        // None while a create plan leaves part unknown; a state that does not fit is
        // reported by read.
        let args = Args::from_value(state).ok()?;
        let loc = args.location(&self.state.settings(), &mut Diagnostics::new())?;
        Some(identity(&loc, &args.name))
    }

    async fn import_identity(&self, given: &Value, diags: &mut Diagnostics) -> Option<Value> {
        let settings = self.state.settings();
        let (loc, name) = parse_identity(given, &settings, diags)?;
        self.import_at(&loc, &name, &settings, diags).await
    }
}

impl NodePool {
    /// The pool as `terraform import` takes it: read whole from the cloud, as a refresh would.
    async fn import_at(
        &self,
        loc: &Location,
        name: &str,
        settings: &Settings,
        diags: &mut Diagnostics,
    ) -> Option<Value> {
        let client = self.client(loc, diags).await?;
        match client.get(loc, name, &self.ctx(&Value::Null, "read")).await {
            Ok(Some(pool)) => state_from_pool(&pool, &Value::Null, settings, diags),
            Ok(None) => {
                diags.push(Diagnostic::error(
                    "Cannot import non-existent node pool",
                    format!("No node pool matches {:?}.", loc.pool_id(name)),
                ));
                None
            }
            Err(e) => {
                diags.push(cloud_diagnostic("import", name, &e));
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tfplugin::object::ToValue;
    use tfplugin::plan::plan;

    /// A configuration as terraform sends it: every attribute present, null unless set.
    fn config(set: &[(&str, Value)]) -> Value {
        let ty = schema().ty();
        let mut v = Value::null_object(&ty);
        for (k, val) in set {
            *v.get_mut(k).unwrap() = val.clone();
        }
        for b in schema().block.blocks.iter().map(|b| b.name.clone()) {
            if v.get(&b).is_null() {
                *v.get_mut(&b).unwrap() = Value::List(vec![]);
            }
        }
        v
    }

    fn aks_block() -> Value {
        Value::List(vec![Value::object([
            ("subscription_id", Value::Null),
            ("resource_group", "rg".into()),
            ("cluster_name", "c".into()),
            ("os_sku", Value::Null),
            ("gpu_driver", Value::Null),
        ])])
    }

    fn sandbox_settings() -> Settings {
        Settings::from_config(&Value::object([("sandbox", "http://127.0.0.1:1".into())]))
    }

    /// The create plan of a time-sliced A100 pool on AKS, with the provider's defaults filled in.
    fn time_sliced_create_plan(name: &str, replicas: i64, settings: &Settings) -> Planned {
        let ts = Value::List(vec![Value::object([
            ("replicas", Value::int(replicas)),
            ("rename_by_default", Value::Null),
            ("fail_requests_greater_than_one", Value::Null),
        ])]);
        let cfg = config(&[
            ("name", name.into()),
            ("machine_type", "Standard_NC24ads_A100_v4".into()),
            ("aks", aks_block()),
            ("time_slicing", ts),
        ]);
        let mut planned = plan(&schema().block, &Value::Null, &cfg, &cfg);
        plan::fill_for_test(&mut planned.state, &cfg, settings);
        planned
    }

    #[test]
    fn create_plan_knows_the_derived_facts() {
        let settings = sandbox_settings();
        let planned = time_sliced_create_plan("a100ts", 10, &settings);
        let mut diags = Diagnostics::new();
        let args = Args::from_value(&planned.state).expect("the plan's arguments are known");
        assert!(
            args.location(&settings, &mut diags).is_some(),
            "{:?}",
            args.target
        );
        let r = resolve(&args, &settings, &mut diags);
        assert!(diags.is_empty(), "{diags:?}");
        let r = r.expect("resolved");
        // The pool's own config, named after it (the settings in the sharing label).
        assert_eq!(
            r.derived.device_plugin_config.unwrap().name,
            "fracgpu-a100ts"
        );
        assert_eq!(r.spec.labels[gpu::SHARING_LABEL], "time-sliced-10");
    }

    #[test]
    fn a_pool_that_cannot_be_read_after_a_failed_create_is_kept_whole_and_known() {
        let settings = sandbox_settings();
        let mut planned = time_sliced_create_plan("unread", 4, &settings);
        let mut diags = Diagnostics::new();
        let args = Args::from_value(&planned.state).expect("known");
        let r = resolve(&args, &settings, &mut diags).expect("resolved");
        // As the plan does.
        *planned.state.get_mut("node_labels").unwrap() = r.spec.labels.to_value();
        assert!(!planned.state.is_fully_known(), "the plan has unknowns");
        let v = unread_pool(&planned.state, &r.spec);
        assert!(v.is_fully_known(), "no unknown goes to state: {v:?}");
        assert_eq!(
            v.get("id").as_str(),
            Some(
                "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/c/agentPools/unread"
            )
        );
        assert_eq!(v.get("status").as_str(), Some("Unknown"));
        assert_eq!(v.get("name"), planned.state.get("name"));
        assert_eq!(v.get("node_labels"), planned.state.get("node_labels"));
    }
}
