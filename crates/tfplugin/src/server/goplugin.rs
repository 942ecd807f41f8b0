//! The services go-plugin's client expects next to the provider: health, controller (Shutdown),
//! stdio and broker.

use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::Notify;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use super::proto::health::{self as hpb, health_check_response::ServingStatus};
use super::proto::plugin as ppb;

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

pub(crate) struct Health;

fn status_of(service: &str) -> Result<hpb::HealthCheckResponse, Status> {
    match service {
        "" | "plugin" => Ok(hpb::HealthCheckResponse {
            status: ServingStatus::Serving as i32,
        }),
        other => Err(Status::not_found(format!("unknown service {other:?}"))),
    }
}

#[tonic::async_trait]
impl hpb::health_server::Health for Health {
    async fn check(
        &self,
        req: Request<hpb::HealthCheckRequest>,
    ) -> Result<Response<hpb::HealthCheckResponse>, Status> {
        status_of(&req.into_inner().service).map(Response::new)
    }

    type WatchStream = BoxStream<hpb::HealthCheckResponse>;

    async fn watch(
        &self,
        req: Request<hpb::HealthCheckRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let first = status_of(&req.into_inner().service)?;
        // The status never changes while the process lives: send it once and keep the stream open.
        let s = tokio_stream::once(Ok(first)).chain(tokio_stream::pending());
        Ok(Response::new(Box::pin(s)))
    }
}

pub(crate) struct Controller {
    pub(crate) shutdown: Arc<Notify>,
}

#[tonic::async_trait]
impl ppb::grpc_controller_server::GrpcController for Controller {
    async fn shutdown(&self, _: Request<ppb::Empty>) -> Result<Response<ppb::Empty>, Status> {
        self.shutdown.notify_one();
        Ok(Response::new(ppb::Empty {}))
    }
}

pub(crate) struct Stdio;

#[tonic::async_trait]
impl ppb::grpc_stdio_server::GrpcStdio for Stdio {
    type StreamStdioStream = BoxStream<ppb::StdioData>;

    async fn stream_stdio(
        &self,
        _: Request<()>,
    ) -> Result<Response<Self::StreamStdioStream>, Status> {
        // Logs go to stderr directly, which terraform captures; nothing travels here.
        Ok(Response::new(Box::pin(tokio_stream::pending())))
    }
}

pub(crate) struct Broker;

#[tonic::async_trait]
impl ppb::grpc_broker_server::GrpcBroker for Broker {
    type StartStreamStream = BoxStream<ppb::ConnInfo>;

    async fn start_stream(
        &self,
        req: Request<Streaming<ppb::ConnInfo>>,
    ) -> Result<Response<Self::StartStreamStream>, Status> {
        // Terraform providers open no brokered connections: drain what arrives, offer nothing.
        let mut incoming = req.into_inner();
        tokio::spawn(async move { while let Some(Ok(_)) = incoming.next().await {} });
        Ok(Response::new(Box::pin(tokio_stream::pending())))
    }
}
