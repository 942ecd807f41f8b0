pub mod kube;
