//! The built-in resources this API server serves, as kube-apiserver v1.34's discovery describes
//! them (the names, scopes, short names, categories, verbs and subresources of the Kubernetes API
//! reference). `tests/sandbox/kube_http/discovery.rs` compares every row with what a real v1.34.9
//! server serves (`shared/fixtures/kube-api-v1.34.9`) and lists what the sandbox leaves out.
//!
//! Every resource is stored as it is written, with the metadata, resourceVersion, managedFields
//! and status subresource semantics of the store; the few behaviours beyond that (a namespace's
//! lifecycle, a Secret's stringData, a ServiceAccount's tokens, a pod's eviction, a CRD serving
//! its kind, the nodes of the twin) are each modelled where the store writes that kind.

use super::kind::{Kind, ALL_VERBS, CREATE_ONLY, GET_LIST, NO_COLLECTION_DELETE};

/// One row: group, version, plural, singular, Kind, scope, short names, categories,
/// subresources, verbs, and whether metadata.generation is kept (kinds with a spec that
/// controllers observe).
macro_rules! kind {
    ($g:literal, $v:literal, $plural:literal, $singular:literal, $kind:literal, $scope:ident,
     $short:expr, $cats:expr, $subs:expr, $verbs:expr, $gen:ident) => {
        Kind {
            group: $g,
            version: $v,
            plural: $plural,
            singular: $singular,
            kind: $kind,
            namespaced: matches!(Scope::$scope, Scope::Namespaced),
            short_names: $short,
            categories: $cats,
            subresources: $subs,
            verbs: $verbs,
            generation: matches!(Generation::$gen, Generation::Kept),
            custom: false,
            unconditional_update: true,
        }
    };
}

enum Scope {
    Namespaced,
    Cluster,
}

enum Generation {
    Kept,
    None,
}

const ALL: &[&str] = &["all"];
const EXT: &[&str] = &["api-extensions"];
const NO: &[&str] = &[];
const ST: &[&str] = &["status"];
const SCALE: &[&str] = &["scale", "status"];

pub(crate) const NAMESPACES: Kind = kind!("", "v1", "namespaces", "namespace", "Namespace", Cluster, &["ns"], NO, &["finalize", "status"], NO_COLLECTION_DELETE, None);
pub(crate) const CONFIGMAPS: Kind = kind!("", "v1", "configmaps", "configmap", "ConfigMap", Namespaced, &["cm"], NO, NO, ALL_VERBS, None);
pub(crate) const SECRETS: Kind = kind!("", "v1", "secrets", "secret", "Secret", Namespaced, NO, NO, NO, ALL_VERBS, None);
pub(crate) const SERVICEACCOUNTS: Kind = kind!("", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", Namespaced, &["sa"], NO, &["token"], ALL_VERBS, None);
pub(crate) const NODES: Kind = kind!("", "v1", "nodes", "node", "Node", Cluster, &["no"], NO, ST, ALL_VERBS, None);
pub(crate) const PODS: Kind = kind!("", "v1", "pods", "pod", "Pod", Namespaced, &["po"], ALL, &["eviction", "status"], ALL_VERBS, None);
pub(crate) const EVENTS: Kind = kind!("", "v1", "events", "event", "Event", Namespaced, &["ev"], NO, NO, ALL_VERBS, None);
pub(crate) const DAEMONSETS: Kind = kind!("apps", "v1", "daemonsets", "daemonset", "DaemonSet", Namespaced, &["ds"], ALL, ST, ALL_VERBS, Kept);
pub(crate) const DEPLOYMENTS: Kind = kind!("apps", "v1", "deployments", "deployment", "Deployment", Namespaced, &["deploy"], ALL, SCALE, ALL_VERBS, Kept);
pub(crate) const JOBS: Kind = kind!("batch", "v1", "jobs", "job", "Job", Namespaced, NO, ALL, ST, ALL_VERBS, Kept);
pub(crate) const CRDS: Kind = kind!("apiextensions.k8s.io", "v1", "customresourcedefinitions", "customresourcedefinition", "CustomResourceDefinition", Cluster, &["crd", "crds"], EXT, ST, ALL_VERBS, Kept);
pub(crate) const ROLES: Kind = kind!("rbac.authorization.k8s.io", "v1", "roles", "role", "Role", Namespaced, NO, NO, NO, ALL_VERBS, None);
pub(crate) const CLUSTERROLES: Kind = kind!("rbac.authorization.k8s.io", "v1", "clusterroles", "clusterrole", "ClusterRole", Cluster, NO, NO, NO, ALL_VERBS, None);
pub(crate) const ROLEBINDINGS: Kind = kind!("rbac.authorization.k8s.io", "v1", "rolebindings", "rolebinding", "RoleBinding", Namespaced, NO, NO, NO, ALL_VERBS, None);
pub(crate) const CLUSTERROLEBINDINGS: Kind = kind!("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "clusterrolebinding", "ClusterRoleBinding", Cluster, NO, NO, NO, ALL_VERBS, None);
pub(crate) const VALIDATING_WEBHOOKS: Kind = kind!("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", "validatingwebhookconfiguration", "ValidatingWebhookConfiguration", Cluster, NO, EXT, NO, ALL_VERBS, Kept);
pub(crate) const SELF_SUBJECT_ACCESS_REVIEWS: Kind = kind!("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "selfsubjectaccessreview", "SelfSubjectAccessReview", Cluster, NO, NO, NO, CREATE_ONLY, None);
pub(crate) const SUBJECT_ACCESS_REVIEWS: Kind = kind!("authorization.k8s.io", "v1", "subjectaccessreviews", "subjectaccessreview", "SubjectAccessReview", Cluster, NO, NO, NO, CREATE_ONLY, None);
pub(crate) const LOCAL_SUBJECT_ACCESS_REVIEWS: Kind = kind!("authorization.k8s.io", "v1", "localsubjectaccessreviews", "localsubjectaccessreview", "LocalSubjectAccessReview", Namespaced, NO, NO, NO, CREATE_ONLY, None);
pub(crate) const SELF_SUBJECT_RULES_REVIEWS: Kind = kind!("authorization.k8s.io", "v1", "selfsubjectrulesreviews", "selfsubjectrulesreview", "SelfSubjectRulesReview", Cluster, NO, NO, NO, CREATE_ONLY, None);
pub(crate) const SELF_SUBJECT_REVIEWS: Kind = kind!("authentication.k8s.io", "v1", "selfsubjectreviews", "selfsubjectreview", "SelfSubjectReview", Cluster, NO, NO, NO, CREATE_ONLY, None);
pub(crate) const TOKEN_REVIEWS: Kind = kind!("authentication.k8s.io", "v1", "tokenreviews", "tokenreview", "TokenReview", Cluster, NO, NO, NO, CREATE_ONLY, None);

/// Every built-in resource, in the order discovery lists them (groups in kube-apiserver's
/// priority order, resources by name within a group version).
pub(crate) const TABLE: &[Kind] = &[
    kind!("", "v1", "bindings", "binding", "Binding", Namespaced, NO, NO, NO, CREATE_ONLY, None),
    kind!("", "v1", "componentstatuses", "componentstatus", "ComponentStatus", Cluster, &["cs"], NO, NO, GET_LIST, None),
    CONFIGMAPS,
    kind!("", "v1", "endpoints", "endpoints", "Endpoints", Namespaced, &["ep"], NO, NO, ALL_VERBS, None),
    EVENTS,
    kind!("", "v1", "limitranges", "limitrange", "LimitRange", Namespaced, &["limits"], NO, NO, ALL_VERBS, None),
    NAMESPACES,
    NODES,
    kind!("", "v1", "persistentvolumeclaims", "persistentvolumeclaim", "PersistentVolumeClaim", Namespaced, &["pvc"], NO, ST, ALL_VERBS, None),
    kind!("", "v1", "persistentvolumes", "persistentvolume", "PersistentVolume", Cluster, &["pv"], NO, ST, ALL_VERBS, None),
    PODS,
    kind!("", "v1", "podtemplates", "podtemplate", "PodTemplate", Namespaced, NO, NO, NO, ALL_VERBS, None),
    kind!("", "v1", "replicationcontrollers", "replicationcontroller", "ReplicationController", Namespaced, &["rc"], ALL, SCALE, ALL_VERBS, Kept),
    kind!("", "v1", "resourcequotas", "resourcequota", "ResourceQuota", Namespaced, &["quota"], NO, ST, ALL_VERBS, None),
    SECRETS,
    SERVICEACCOUNTS,
    kind!("", "v1", "services", "service", "Service", Namespaced, &["svc"], ALL, ST, ALL_VERBS, None),
    kind!("apiregistration.k8s.io", "v1", "apiservices", "apiservice", "APIService", Cluster, NO, EXT, ST, ALL_VERBS, None),
    kind!("apps", "v1", "controllerrevisions", "controllerrevision", "ControllerRevision", Namespaced, NO, NO, NO, ALL_VERBS, None),
    DAEMONSETS,
    DEPLOYMENTS,
    kind!("apps", "v1", "replicasets", "replicaset", "ReplicaSet", Namespaced, &["rs"], ALL, SCALE, ALL_VERBS, Kept),
    kind!("apps", "v1", "statefulsets", "statefulset", "StatefulSet", Namespaced, &["sts"], ALL, SCALE, ALL_VERBS, Kept),
    kind!("events.k8s.io", "v1", "events", "event", "Event", Namespaced, &["ev"], NO, NO, ALL_VERBS, None),
    SELF_SUBJECT_REVIEWS,
    TOKEN_REVIEWS,
    LOCAL_SUBJECT_ACCESS_REVIEWS,
    SELF_SUBJECT_ACCESS_REVIEWS,
    SELF_SUBJECT_RULES_REVIEWS,
    SUBJECT_ACCESS_REVIEWS,
    kind!("autoscaling", "v2", "horizontalpodautoscalers", "horizontalpodautoscaler", "HorizontalPodAutoscaler", Namespaced, &["hpa"], ALL, ST, ALL_VERBS, None),
    kind!("autoscaling", "v1", "horizontalpodautoscalers", "horizontalpodautoscaler", "HorizontalPodAutoscaler", Namespaced, &["hpa"], ALL, ST, ALL_VERBS, None),
    kind!("batch", "v1", "cronjobs", "cronjob", "CronJob", Namespaced, &["cj"], ALL, ST, ALL_VERBS, Kept),
    JOBS,
    kind!("certificates.k8s.io", "v1", "certificatesigningrequests", "certificatesigningrequest", "CertificateSigningRequest", Cluster, &["csr"], NO, &["approval", "status"], ALL_VERBS, None),
    kind!("networking.k8s.io", "v1", "ingressclasses", "ingressclass", "IngressClass", Cluster, NO, NO, NO, ALL_VERBS, None),
    kind!("networking.k8s.io", "v1", "ingresses", "ingress", "Ingress", Namespaced, &["ing"], NO, ST, ALL_VERBS, None),
    kind!("networking.k8s.io", "v1", "ipaddresses", "ipaddress", "IPAddress", Cluster, &["ip"], NO, NO, ALL_VERBS, None),
    kind!("networking.k8s.io", "v1", "networkpolicies", "networkpolicy", "NetworkPolicy", Namespaced, &["netpol"], NO, NO, ALL_VERBS, None),
    kind!("networking.k8s.io", "v1", "servicecidrs", "servicecidr", "ServiceCIDR", Cluster, NO, NO, ST, ALL_VERBS, None),
    kind!("policy", "v1", "poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget", Namespaced, &["pdb"], NO, ST, ALL_VERBS, None),
    CLUSTERROLEBINDINGS,
    CLUSTERROLES,
    ROLEBINDINGS,
    ROLES,
    kind!("storage.k8s.io", "v1", "csidrivers", "csidriver", "CSIDriver", Cluster, NO, NO, NO, ALL_VERBS, None),
    kind!("storage.k8s.io", "v1", "csinodes", "csinode", "CSINode", Cluster, NO, NO, NO, ALL_VERBS, None),
    kind!("storage.k8s.io", "v1", "csistoragecapacities", "csistoragecapacity", "CSIStorageCapacity", Namespaced, NO, NO, NO, ALL_VERBS, None),
    kind!("storage.k8s.io", "v1", "storageclasses", "storageclass", "StorageClass", Cluster, &["sc"], NO, NO, ALL_VERBS, None),
    kind!("storage.k8s.io", "v1", "volumeattachments", "volumeattachment", "VolumeAttachment", Cluster, NO, NO, ST, ALL_VERBS, None),
    kind!("storage.k8s.io", "v1", "volumeattributesclasses", "volumeattributesclass", "VolumeAttributesClass", Cluster, &["vac"], NO, NO, ALL_VERBS, None),
    kind!("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "mutatingwebhookconfiguration", "MutatingWebhookConfiguration", Cluster, NO, EXT, NO, ALL_VERBS, Kept),
    kind!("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", "validatingadmissionpolicy", "ValidatingAdmissionPolicy", Cluster, NO, EXT, ST, ALL_VERBS, Kept),
    kind!("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings", "validatingadmissionpolicybinding", "ValidatingAdmissionPolicyBinding", Cluster, NO, EXT, NO, ALL_VERBS, Kept),
    VALIDATING_WEBHOOKS,
    CRDS,
    kind!("scheduling.k8s.io", "v1", "priorityclasses", "priorityclass", "PriorityClass", Cluster, &["pc"], NO, NO, ALL_VERBS, None),
    kind!("coordination.k8s.io", "v1", "leases", "lease", "Lease", Namespaced, NO, NO, NO, ALL_VERBS, None),
    kind!("node.k8s.io", "v1", "runtimeclasses", "runtimeclass", "RuntimeClass", Cluster, NO, NO, NO, ALL_VERBS, None),
    kind!("discovery.k8s.io", "v1", "endpointslices", "endpointslice", "EndpointSlice", Namespaced, NO, NO, NO, ALL_VERBS, None),
    kind!("resource.k8s.io", "v1", "deviceclasses", "deviceclass", "DeviceClass", Cluster, NO, NO, NO, ALL_VERBS, Kept),
    kind!("resource.k8s.io", "v1", "resourceclaims", "resourceclaim", "ResourceClaim", Namespaced, NO, NO, ST, ALL_VERBS, None),
    kind!("resource.k8s.io", "v1", "resourceclaimtemplates", "resourceclaimtemplate", "ResourceClaimTemplate", Namespaced, NO, NO, NO, ALL_VERBS, None),
    kind!("resource.k8s.io", "v1", "resourceslices", "resourceslice", "ResourceSlice", Cluster, NO, NO, NO, ALL_VERBS, None),
    kind!("flowcontrol.apiserver.k8s.io", "v1", "flowschemas", "flowschema", "FlowSchema", Cluster, NO, NO, ST, ALL_VERBS, Kept),
    kind!("flowcontrol.apiserver.k8s.io", "v1", "prioritylevelconfigurations", "prioritylevelconfiguration", "PriorityLevelConfiguration", Cluster, NO, NO, ST, ALL_VERBS, Kept),
];
