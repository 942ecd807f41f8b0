//! Acceptance tests: the real terraform binary drives the provider against the sandbox (node
//! pools on each cloud, device plugin configs with each delivery, data sources and functions,
//! the examples, docs, logs, releases), under terraform 1.11 and, where it matters, 1.15. One
//! test binary, so a change links once; each module holds one subject.

#[path = "../common/mod.rs"]
mod common;

mod actions;
mod actions_mig_configs;
mod actions_real;
mod adopt_pools;
mod data_source_machine_type;
mod device_plugin_config;
mod device_plugin_config_access;
mod device_plugin_config_allocation;
mod device_plugin_config_apiserver_restart;
mod device_plugin_config_bad_input;
mod device_plugin_config_chart;
mod device_plugin_config_gitops;
mod device_plugin_config_helm;
mod device_plugin_config_mps;
mod device_plugin_config_query;
mod device_plugin_config_rbac;
mod device_plugin_config_real;
mod device_plugin_config_standalone;
mod docs;
mod drift_detection;
mod examples;
mod karpenter_nodepool;
mod karpenter_objects;
mod logging;
mod module_tftest;
mod nodepool_aks;
mod nodepool_autoscaler_template;
mod nodepool_bad_input;
mod nodepool_eks_ami;
mod nodepool_faults;
mod nodepool_gke_eks;
mod nodepool_moto;
mod nodepool_quotas;
mod nodepool_real_autoscaler;
mod nodepool_scale_to_zero;
mod nodepool_twin;
mod release;
mod request_counts;
mod sharing_change;
mod sharing_change_control_plane;
mod terraform_versions;
mod workload_and_functions;
