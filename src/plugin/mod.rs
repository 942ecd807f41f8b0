//! The protocol layer.
#[allow(clippy::all, clippy::pedantic)]
pub(crate) mod proto {
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
