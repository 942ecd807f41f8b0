//! The schema of `fracgpu_device_plugin_config` (version 0), and the names and limits it uses.
//! The deliveries' blocks, and the list of them the `delivery` attribute takes, come from the
//! deliveries themselves (`delivery`).

use std::time::Duration;

use crate::model;
use tfplugin::plan::Timeouts;
use tfplugin::schema::{Attribute, Block, Nesting, Schema};
use tfplugin::types::Type;
use tfplugin::validators::{Matches, OneOf};

use super::delivery;
use super::desired::config_block;
use super::names::{DNS_LABEL_HINT, DNS_LABEL_RE, DNS_SUBDOMAIN_RE};

pub(super) const DEFAULT_NAMESPACE: &str = "gpu-operator";
pub(super) const DEFAULT_NAME: &str = "time-slicing-config";
const MIG_STRATEGIES: &[&str] = &["none", "single", "mixed"];

/// How long each operation may take when `timeouts` does not say: a helm upgrade of the operator
/// can take minutes, a read is a few GETs.
pub(super) const TIMEOUTS: Timeouts = Timeouts(&[
    ("create", Duration::from_secs(600)),
    ("read", Duration::from_secs(120)),
    ("update", Duration::from_secs(600)),
    ("delete", Duration::from_secs(600)),
]);

pub fn schema() -> Schema {
    let block = Block::new(
        "The NVIDIA device plugin's named sharing configs (time-slicing, MPS, \
        MIG strategy), delivered where the plugin reads them: through the GPU operator (NVIDIA's \
        gpu-operator chart, v25.10 and v26.7: a ConfigMap and the ClusterPolicy pointer, the \
        operator's Helm release, or the Argo CD Application or Flux HelmRelease that installs it), \
        or NVIDIA's standalone `nvidia-device-plugin` chart on clusters without the operator. \
        Drift (a hand-edited ConfigMap, a changed pointer, changed Helm values) shows in the plan; \
        re-formatting never does. Every change restarts the daemonsets that read the configs, \
        which neither the operator nor the plugin does itself.",
    )
    .attr(
        Attribute::string("id")
            .computed()
            .describe("`namespace/name` of the ConfigMap."),
    )
    .attr(
        Attribute::string("namespace")
            .optional()
            .computed()
            .requires_replace()
            .describe(&format!(
                "Namespace of the ConfigMap and of the operator's daemonset. Default \
            `{DEFAULT_NAMESPACE}`; with delivery `helm` or `nvidia_device_plugin` the release's \
            namespace, with `argocd` or \
            `flux` the namespace the chart is installed into (the Application's \
            `spec.destination.namespace`, the HelmRelease's `targetNamespace`), read at apply. The \
            operator reads the config only from its own namespace: another one is a warning."
            ))
            .validate(Matches::new(DNS_LABEL_RE, DNS_LABEL_HINT)),
    )
    .attr(
        Attribute::string("name")
            .optional()
            .computed()
            .requires_replace()
            .describe(&format!("Name of the ConfigMap. Default `{DEFAULT_NAME}`."))
            .validate(Matches::new(
                DNS_SUBDOMAIN_RE,
                "a DNS-1123 subdomain (lowercase letters, \
                digits, '-', '.')",
            )),
    )
    .attr(Attribute::string("default_config").optional().describe(
        "The config of nodes without the `nvidia.com/device-plugin.config` label; must be one \
            of the `config` names.",
    ))
    .attr(
        Attribute::string("mig_strategy")
            .optional()
            .describe(
                "`none`, `single` or `mixed`, set on the ClusterPolicy (`spec.mig.strategy`; the \
            operator hands it to the plugin, overriding the file's flag), or in the release's \
            values with delivery `helm`. Default: the operator's own value is left alone. With \
            delivery `cluster_policy` the value is refused while a server-side apply manager holds \
            the field (a Helm 4 release of the operator), because taking it would make that \
            release's next `helm upgrade` fail; destroy gives a value it took from Helm 3 back \
            (after an import, which has no record of the earlier value, the value stays as it is). \
            A config with the mixed MIG strategy while the operator's is another is a warning: the \
            operator's value wins.",
            )
            .validate(OneOf(MIG_STRATEGIES)),
    )
    .attr(
        Attribute::string("delivery")
            .optional()
            .computed()
            .requires_replace()
            .describe(&format!(
                "{}. Changing it replaces the resource, so the old delivery is undone.",
                delivery::summaries()
            ))
            .validate(OneOf(delivery::names())),
    )
    .attr(
        Attribute::new("data", Type::map(Type::String))
            .computed()
            .describe("The ConfigMap's data: config name -> rendered YAML."),
    )
    .attr(Attribute::string("helm_values").computed().describe(
        "The same as GPU operator Helm values (under `values_path`), for a `helm_release` of \
            your own.",
    ))
    .attr(Attribute::string("restarted_at").computed().describe(
        "When the device plugin daemonset was last restarted by this resource (RFC 3339). Null \
            with `argocd` and `flux`: the controller renders the configs on its own sync, after \
            this resource is done, so a restart here would load the old ones.",
    ))
    .single_block(
        "kubernetes",
        model::kubernetes_block(
            "How to reach the cluster. Default: the provider's `kubernetes` block, then \
            `KUBECONFIG` / `~/.kube/config` / in-cluster.",
        ),
    )
    .block("config", Nesting::List, config_block());
    let block =
        delivery::blocks().fold(block, |b, (name, settings)| b.single_block(name, settings));
    Schema::new(0, block.single_block("timeouts", TIMEOUTS.block()))
}
