//! The schema of `fracgpu_device_plugin_config` (version 0), and the names and limits it uses.

use std::time::Duration;

use crate::model;
use tfplugin::plan::Timeouts;
use tfplugin::schema::{Attribute, Block, Nesting, Schema};
use tfplugin::types::Type;
use tfplugin::validators::{Matches, OneOf};

pub(super) const DEFAULT_NAMESPACE: &str = "gpu-operator";
pub(super) const DEFAULT_NAME: &str = "time-slicing-config";
pub const DEFAULT_VALUES_PATH: &str = "devicePlugin";
pub(super) const DEFAULT_ARGOCD_NAMESPACE: &str = "argocd";
pub(super) const DEFAULT_FLUX_NAMESPACE: &str = "flux-system";
const DELIVERIES: &[&str] = &["cluster_policy", "helm", "argocd", "flux"];
const VALUES_PATH_RE: &str = r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$";
const VALUES_PATH_HINT: &str =
    "dotted value keys such as devicePlugin or gpu-operator.devicePlugin";
const MIG_STRATEGIES: &[&str] = &["none", "single", "mixed"];
/// A node selects a config through a label, so a name must be a valid label value (which is
/// also a valid ConfigMap key).
const CONFIG_NAME_RE: &str = r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$";
pub(super) const DNS_LABEL_RE: &str = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$";
pub(super) const DNS_SUBDOMAIN_RE: &str = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$";

/// How long each operation may take when `timeouts` does not say: a helm upgrade of the operator
/// can take minutes, a read is a few GETs.
pub(super) const TIMEOUTS: Timeouts = Timeouts(&[
    ("create", Duration::from_secs(600)),
    ("read", Duration::from_secs(120)),
    ("update", Duration::from_secs(600)),
    ("delete", Duration::from_secs(600)),
]);

pub fn schema() -> Schema {
    let config = model::sharing_blocks(
        Block::new(
            "One named config of the ConfigMap. Nodes select it with the label \
            `nvidia.com/device-plugin.config=<name>`. Give the sharing as a block, or the YAML \
            itself (a node pool's `device_plugin_config`), or neither for whole GPUs.",
        )
        .attr(
            Attribute::string("name")
                .required()
                .describe(
                    "The config's key in the ConfigMap and the node label value: up to 63 letters, \
                digits, `-`, `_`, `.`, starting and ending alphanumeric.",
                )
                .validate(Matches::new(
                    CONFIG_NAME_RE,
                    "a valid ConfigMap key and label value (up \
                    to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or \
                    digit)",
                )),
        )
        .attr(Attribute::string("yaml").optional().describe(
            "The config document itself, e.g. `fracgpu_nodepool.x.device_plugin_config`. \
                Compared by meaning, so formatting never shows as a change.",
        )),
        false,
    );
    let helm = Block::new(
        "Deliver through the GPU operator's Helm release instead of a ConfigMap \
        of our own. Each apply runs `helm upgrade --reset-values` with the release's complete user \
        values and this resource's device plugin values in them, against the cluster `kubernetes` \
        names (never `KUBECONFIG`'s): a removed config leaves what the chart renders, while \
        configs the chart's own values define stay (a warning lists them). Destroy gives the \
        release back the device plugin values it had before this resource, or the chart's defaults \
        when it had none.",
    )
    .attr(
        Attribute::string("release")
            .required()
            .describe("Release name, e.g. `gpu-operator`."),
    )
    .attr(
        Attribute::string("namespace")
            .required()
            .describe("Namespace of the release."),
    )
    .attr(Attribute::string("chart").required().describe(
        "The chart `helm upgrade` is given, e.g. `nvidia/gpu-operator` or an `oci://` \
            reference.",
    ))
    .attr(Attribute::string("chart_version").optional().describe(
        "Chart version for the upgrade. Default: the deployed release's, so only values change.",
    ))
    .attr(
        Attribute::string("values_path")
            .optional()
            .describe(
                "Dotted path of the operator's `devicePlugin` values, e.g. \
            `azure-aks-gpu-operator.devicePlugin` for a wrapping chart. Default `devicePlugin`.",
            )
            .validate(Matches::new(VALUES_PATH_RE, VALUES_PATH_HINT)),
    )
    .attr(
        Attribute::string("helm_path")
            .optional()
            .describe("The helm executable, Helm 3 or 4. Default `helm` on the PATH."),
    );
    let argocd = Block::new(
        "Deliver through the Argo CD `Application` that installs the GPU \
        operator's chart: the configs are written into its Helm values \
        (`spec.source.helm.valuesObject`, or that of the one `spec.sources[]` entry that is the \
        chart), every other value is left alone, and Argo CD renders them on its next sync. Only \
        `values_path` changes; a hand edit there is drift. Destroy gives the Application back what \
        it had there. The `helm.values` string is read (it renders too) but never rewritten; \
        `valuesObject` takes precedence over it.",
    )
    .attr(
        Attribute::string("application")
            .required()
            .describe("Name of the Application, e.g. `gpu-operator`."),
    )
    .attr(
        Attribute::string("namespace")
            .optional()
            .describe(&format!(
                "Namespace of the Application. Default `{DEFAULT_ARGOCD_NAMESPACE}`."
            ))
            .validate(Matches::new(
                DNS_LABEL_RE,
                "a DNS-1123 label (lowercase letters, digits, \
                '-', up to 63)",
            )),
    )
    .attr(Attribute::string("chart").optional().describe(
        "With several `spec.sources`, the `chart` of the one that installs the operator, e.g. \
            `gpu-operator`.",
    ))
    .attr(
        Attribute::string("values_path")
            .optional()
            .describe(
                "Dotted path of the operator's `devicePlugin` values in the chart. Default \
            `devicePlugin`.",
            )
            .validate(Matches::new(VALUES_PATH_RE, VALUES_PATH_HINT)),
    );
    let flux = Block::new(
        "Deliver through the Flux `HelmRelease` that installs the GPU operator's \
        chart: the configs are written into its `spec.values` (which Flux merges over \
        `valuesFrom`), every other value is left alone, and helm-controller renders them on its \
        next reconciliation. A hand edit there is drift; destroy gives the HelmRelease back what \
        it had there.",
    )
    .attr(
        Attribute::string("helm_release")
            .required()
            .describe("Name of the HelmRelease, e.g. `gpu-operator`."),
    )
    .attr(
        Attribute::string("namespace")
            .optional()
            .describe(&format!(
                "Namespace of the HelmRelease. Default `{DEFAULT_FLUX_NAMESPACE}`."
            ))
            .validate(Matches::new(
                DNS_LABEL_RE,
                "a DNS-1123 label (lowercase letters, digits, \
                '-', up to 63)",
            )),
    )
    .attr(
        Attribute::string("values_path")
            .optional()
            .describe(
                "Dotted path of the operator's `devicePlugin` values in the chart. Default \
            `devicePlugin`.",
            )
            .validate(Matches::new(VALUES_PATH_RE, VALUES_PATH_HINT)),
    );
    let block = Block::new("The NVIDIA device plugin's named sharing configs (time-slicing, MPS, \
        MIG strategy), delivered through the GPU operator: a ConfigMap and the ClusterPolicy \
        pointer, or the operator's Helm release. Drift (a hand-edited ConfigMap, a changed \
        pointer, changed Helm values) shows in the plan; re-formatting never does. Every change \
        restarts the device plugin daemonset, which the operator does not do itself.")
        .attr(Attribute::string("id").computed().describe("`namespace/name` of the ConfigMap."))
        .attr(Attribute::string("namespace").optional().computed().requires_replace().describe(&format!(
            "Namespace of the ConfigMap and of the operator's daemonset. Default \
            `{DEFAULT_NAMESPACE}`; with delivery `helm` the release's namespace, with `argocd` or \
            `flux` the namespace the chart is installed into (the Application's \
            `spec.destination.namespace`, the HelmRelease's `targetNamespace`), read at apply. The \
            operator reads the config only from its own namespace: another one is a warning."))
            .validate(Matches::new(DNS_LABEL_RE, "a DNS-1123 label (lowercase letters, digits, \
                '-', up to 63)")))
        .attr(Attribute::string("name").optional().computed().requires_replace().describe(&format!(
            "Name of the ConfigMap. Default `{DEFAULT_NAME}`."))
            .validate(Matches::new(DNS_SUBDOMAIN_RE, "a DNS-1123 subdomain (lowercase letters, \
                digits, '-', '.')")))
        .attr(Attribute::string("default_config").optional().describe(
            "The config of nodes without the `nvidia.com/device-plugin.config` label; must be one \
            of the `config` names."))
        .attr(Attribute::string("mig_strategy").optional().describe(
            "`none`, `single` or `mixed`, set on the ClusterPolicy (`spec.mig.strategy`; the \
            operator hands it to the plugin, overriding the file's flag), or in the release's \
            values with delivery `helm`. Default: the operator's own value is left alone. With \
            delivery `cluster_policy` the value is refused while a server-side apply manager holds \
            the field (a Helm 4 release of the operator), because taking it would make that \
            release's next `helm upgrade` fail; destroy gives a value it took from Helm 3 back \
            (after an import, which has no record of the earlier value, the value stays as it is). \
            A config with the mixed MIG strategy while the operator's is another is a warning: the \
            operator's value wins.").validate(OneOf(MIG_STRATEGIES)))
        .attr(Attribute::string("delivery").optional().computed().requires_replace().describe(
            "`cluster_policy` (default: server-side apply of the ConfigMap and the ClusterPolicy \
            pointer), `helm` (upgrade the operator's release), `argocd` (the values of the Argo CD \
            Application that installs it) or `flux` (the values of its Flux HelmRelease). Changing \
            it replaces the resource, so the old delivery is undone.").validate(OneOf(DELIVERIES)))
        .attr(Attribute::new("data", Type::map(Type::String)).computed().describe(
            "The ConfigMap's data: config name -> rendered YAML."))
        .attr(Attribute::string("helm_values").computed().describe(
            "The same as GPU operator Helm values (under `values_path`), for a `helm_release` of \
            your own."))
        .attr(Attribute::string("restarted_at").computed().describe(
            "When the device plugin daemonset was last restarted by this resource (RFC 3339). Null \
            with `argocd` and `flux`: the controller renders the configs on its own sync, after \
            this resource is done, so a restart here would load the old ones."))
        .single_block("kubernetes", model::kubernetes_block(
            "How to reach the cluster. Default: the provider's `kubernetes` block, then \
            `KUBECONFIG` / `~/.kube/config` / in-cluster."))
        .block("config", Nesting::List, config)
        .single_block("helm", helm)
        .single_block("argocd", argocd)
        .single_block("flux", flux)
        .single_block("timeouts", TIMEOUTS.block());
    Schema::new(0, block)
}
