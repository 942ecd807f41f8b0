//! The protocol layer: the go-plugin handshake and AutoMTLS, the tfplugin6 gRPC service and
//! go-plugin's companion services, and conversions between protobuf messages and the `tf` model.
//! Knows nothing of what a provider manages; provider code never sees a protobuf type.

mod convert;
mod goplugin;
pub mod log;
mod provider_service;
mod serve;
mod tls;

pub use serve::{Options, StartError, serve};

/// Generated code, private to this layer (tests reach it through `tfplugin::server::proto`).
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod proto {
    pub mod tfplugin6 {
        tonic::include_proto!("tfplugin6");
    }
    pub mod plugin {
        tonic::include_proto!("plugin");
    }
    pub mod health {
        tonic::include_proto!("grpc.health.v1");
    }
}
