//! The import ID, read into the arguments an import starts from. The default delivery's ID is
//! the ConfigMap's `<namespace>/<name>`; another delivery's names its object too, behind the
//! delivery's name: `helm:<namespace>/<release>/<configmap>`. Without it an import could not
//! know which delivery wrote the ConfigMap, and since changing `delivery` replaces the resource,
//! the first apply after importing a release's config would undo that release's delivery.

use tfplugin::Diagnostics;
use tfplugin::object::ToValue;

use super::delivery::{self, Placement};
use super::model::Args;
use super::names::{DNS_LABEL_RE, DNS_SUBDOMAIN_RE};
use super::schema::DEFAULT_NAMESPACE;

/// A pattern's body, without its anchors, to compose an ID's pattern from.
fn body(re: &str) -> &str {
    &re[1..re.len() - 1]
}

/// The arguments `id` names (namespace, name, delivery and its block), or what is wrong with it.
pub(super) fn args(id: &str) -> Result<Args, String> {
    let (label, sub) = (body(DNS_LABEL_RE), body(DNS_SUBDOMAIN_RE));
    let plain =
        regex_lite::Regex::new(&format!("^(?P<ns>{label})/(?P<name>{sub})$")).expect("a pattern");
    if let Some(c) = plain.captures(id) {
        return Ok(Args {
            namespace: Some(c["ns"].to_string()),
            name: Some(c["name"].to_string()),
            delivery: Some(delivery::default_name().to_string()),
            ..Args::default()
        });
    }
    let prefixed = regex_lite::Regex::new(&format!(
        "^(?P<delivery>[a-z_]+):(?P<ns>{label})/(?P<object>{sub})/(?P<name>{sub})$"
    ))
    .expect("a pattern");
    let Some(c) = prefixed.captures(id) else {
        return Err(refusal(id));
    };
    let Some(blocks) = delivery::imported(&c["delivery"], &c["ns"], &c["object"]) else {
        return Err(refusal(id));
    };
    let mut args = Args {
        name: Some(c["name"].to_string()),
        delivery: Some(c["delivery"].to_string()),
        blocks,
        ..Args::default()
    };
    args.namespace = namespace_of(&args);
    Ok(args)
}

/// Where the delivery places the ConfigMap: a release's namespace; the default; or unset for a
/// GitOps object, whose destination the read after the import fills in.
fn namespace_of(args: &Args) -> Option<String> {
    match delivery::placement(&args.to_value(), &mut Diagnostics::new()) {
        Placement::In(ns) => Some(ns),
        Placement::Default => Some(DEFAULT_NAMESPACE.to_string()),
        Placement::AtApply => None,
    }
}

fn refusal(id: &str) -> String {
    format!(
        "{id:?} is not an import ID of this resource. With delivery \"{}\" it is \
        `<namespace>/<name>` of the ConfigMap, e.g. `gpu-operator/time-slicing-config`; with \
        another delivery its name, a colon and the object it writes beside the ConfigMap's name: \
        {}, e.g. `helm:gpu-operator/gpu-operator/time-slicing-config`.",
        delivery::default_name(),
        delivery::import_forms().join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use tfplugin::object::FromValue;

    #[test]
    fn each_form_names_its_delivery_and_where_the_configmap_lives() {
        let a = args("gpu-operator/ts").unwrap();
        assert_eq!(
            (
                a.namespace.as_deref(),
                a.name.as_deref(),
                a.delivery.as_deref()
            ),
            (Some("gpu-operator"), Some("ts"), Some("cluster_policy"))
        );
        let a = args("nvidia_device_plugin:nvdp-ns/nvdp/time-slicing-config").unwrap();
        assert_eq!(a.namespace.as_deref(), Some("nvdp-ns"));
        assert_eq!(a.name.as_deref(), Some("time-slicing-config"));
        let block = a.to_value().get("nvidia_device_plugin").clone();
        assert_eq!(
            block.elements()[0].get("release"),
            &tfplugin::Value::string("nvdp")
        );
        // A GitOps object: the destination is read after the import; the default namespace of
        // the object stays unset, as a configuration leaves it.
        let a = args("argocd:argocd/gpu-operator/time-slicing-config").unwrap();
        assert_eq!(a.namespace, None);
        let argo = a.to_value().get("argocd").elements()[0].clone();
        assert_eq!(argo.get("namespace"), &tfplugin::Value::Null);
        let a = args("flux:platform/gpu-operator/cm").unwrap();
        assert_eq!(
            a.to_value().get("flux").elements()[0].get("namespace"),
            &tfplugin::Value::string("platform")
        );
        // Every form reads back as the arguments of a configuration.
        assert!(Args::from_value(&a.to_value()).is_ok());
    }

    #[test]
    fn an_id_that_does_not_read_lists_every_form() {
        for bad in [
            "time-slicing-config",
            "cluster_policy:gpu-operator/x/y",
            "kustomize:ns/obj/cm",
            "helm:gpu-operator/time-slicing-config",
            "helm:Bad/rel/cm",
        ] {
            let e = args(bad).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
            for form in [
                "`helm:<namespace>/<release>/<configmap>`",
                "`nvidia_device_plugin:<namespace>/<release>/<configmap>`",
                "`argocd:<namespace>/<application>/<configmap>`",
                "`flux:<namespace>/<helm_release>/<configmap>`",
            ] {
                assert!(e.contains(form), "{form} in {e}");
            }
        }
    }
}
