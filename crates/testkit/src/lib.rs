//! The test harness every crate of the workspace shares (a dev-dependency only): finding the
//! real tools the tests drive, and failing under CI when one is missing; a real kube-apiserver
//! for the Kubernetes tests; and the benchmarks' figures file.

pub mod apiserver;
pub mod figures;
pub mod tools;
