//! The sandbox's integration tests, one binary: the twin's cluster-autoscalers (`autoscaler`), the
//! cloud emulators over HTTP (`cloud`), against
//! real clients (`cli`), the `fracgpu-sandbox` binary (`bin`), each cluster's Kubernetes API
//! (`kube_http`) and the whole stack (`stack`). One binary links once instead of five times; no test
//! here changes process-wide state (environment, working directory, global TLS provider), so they
//! can share a process.

mod autoscaler;
mod bin;
mod charts;
mod cli;
mod cloud;
mod kube_http;
mod stack;
mod support;
