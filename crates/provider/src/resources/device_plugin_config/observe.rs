//! Reading back what the cluster delivers, as the delivery's consumer reads it (each delivery's
//! `read_back`), and the refreshed state, which compares configs by meaning so that
//! re-formatting never shows as drift while a hand edit does.

use std::collections::BTreeMap;

use tfplugin::object::{Decoded, FromValue, merge};
use tfplugin::{Diagnostic, Diagnostics, Value};

use super::desired::{config_blocks, reconcile};
use super::diagnostics::{warn_operator_mismatch, warn_unknown_labels};
use super::model::{Args, Computed, REIMPORT, State, resolve, stored};
use super::resource::DevicePluginConfigResource;

impl DevicePluginConfigResource {
    /// The refreshed state; None when the delivery is gone (terraform plans to create it
    /// again) or after an error diagnostic.
    pub(super) async fn do_read(&self, state: &Value, diags: &mut Diagnostics) -> Option<Value> {
        let State {
            mut args,
            delivered,
            ..
        } = State::from_value(state).or_report_state(diags, REIMPORT)?;
        let c = self.connect(&args, diags).await?;
        let now = stored(&args)?;
        let declared: Vec<String> = args.config.iter().map(|c| c.name.clone()).collect();
        let seen = now
            .delivery
            .life()
            .read_back(&self.at(&c, &now.desired), &declared, diags)
            .await?;
        // A vanished ConfigMap: the resource is gone and will be created again.
        let cluster_data = seen.data.clone()?;
        let prior_data = delivered.data.unwrap_or_default();
        // The operator reads our data only while the pointer names our ConfigMap.
        let data = if seen.pointer_name.as_deref() == Some(args.name()) {
            reconcile(&prior_data, &cluster_data)
        } else {
            BTreeMap::new()
        };
        let imported = args.config.is_empty();
        if args.default_config.is_some() || imported {
            args.default_config = seen.default.clone();
        }
        if seen.mig_strategy_ours || args.mig_strategy.is_some() {
            args.mig_strategy = seen.mig_strategy.clone();
        }
        if imported {
            // Rebuild the blocks from what the cluster holds; a GitOps object's import learns
            // where its chart installs the operator here.
            args.config = config_blocks(&cluster_data);
            if args.namespace.is_none() {
                args.namespace = seen.operator_namespace.clone();
            }
            if seen.pointer_name.as_deref() != Some(args.name()) {
                warn_not_read(&args, seen.pointer_name.as_deref(), diags);
            }
        }
        let mut st = state.clone();
        merge(&mut st, &args);
        // helm_values stays consistent with what was read; data is what the cluster holds.
        let mut computed = Computed {
            id: format!("{}/{}", args.namespace(), args.name()),
            data: data.clone(),
            helm_values: String::new(),
        };
        match resolve(&args, &mut Diagnostics::new()) {
            Some(r) => {
                computed.helm_values = r.computed().helm_values;
                warn_operator_mismatch(
                    &r.desired,
                    seen.operator_namespace.as_deref(),
                    seen.mig_strategy.as_deref(),
                    diags,
                );
                warn_unknown_labels(&c, &r.desired, diags).await;
            }
            None => computed.helm_values = delivered.helm_values.unwrap_or_default(),
        }
        merge(&mut st, &computed);
        Some(st)
    }
}

/// An imported ConfigMap its consumer does not read: most likely another delivery writes it,
/// which the import ID must name (changing `delivery` later replaces the resource).
fn warn_not_read(args: &Args, reads: Option<&str>, diags: &mut Diagnostics) {
    let delivery = args.delivery.as_deref().unwrap_or_default();
    let reads = reads.map_or("no ConfigMap".to_string(), |n| {
        format!("the ConfigMap {n:?}")
    });
    diags.push(Diagnostic::warning(
        "Imported ConfigMap is not read",
        format!(
            "The ConfigMap {}/{} was imported with delivery \"{delivery}\", which reads {reads} \
            instead, so its configs plan as changes. If another delivery writes it, remove it \
            from the state and import it with that delivery's ID ({}): changing `delivery` \
            after the import replaces the resource.",
            args.namespace(),
            args.name(),
            super::delivery::import_forms().join(", ")
        ),
    ));
}
