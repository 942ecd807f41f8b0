//! Serving the provider the way go-plugin expects: check the magic cookie, listen on a private
//! unix socket (TCP on 127.0.0.1 as fallback), print the handshake line, and serve gRPC over
//! AutoMTLS until terraform calls Shutdown.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use base64::Engine;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{Notify, mpsc};
use tonic::transport::server::Connected;

use super::goplugin::{Broker, Controller, Health, Stdio};
use super::proto::{
    health::health_server::HealthServer, plugin as ppb, tfplugin6::provider_server::ProviderServer,
};
use super::provider_service::{ProviderService, Registry};
use super::tls;
use crate::api::Provider;

const MAGIC_COOKIE_KEY: &str = "TF_PLUGIN_MAGIC_COOKIE";
const MAGIC_COOKIE_VALUE: &str = "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2";
const PROTOCOL_VERSION: u32 = 6;
/// Terraform accepts schemas up to 64 MiB; leave room for large plans.
const MAX_MESSAGE_BYTES: usize = 256 * 1024 * 1024;
/// A client that has not finished its TLS handshake by then is dropped.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How the provider serves.
pub struct Options {
    /// Serve without TLS and print TF_REATTACH_PROVIDERS for a terraform started by hand.
    pub debug: bool,
    /// The registry address terraform knows the provider by, e.g.
    /// `registry.terraform.io/NAMESPACE/TYPE`.
    pub address: &'static str,
}

/// Why the provider could not start; printed for the human who ran it.
#[derive(Debug)]
pub struct StartError(pub String);

fn check_started_by_terraform(address: &str) -> Result<(), StartError> {
    if std::env::var(MAGIC_COOKIE_KEY).as_deref() != Ok(MAGIC_COOKIE_VALUE) {
        let source = address.split_once('/').map_or(address, |(_, s)| s);
        return Err(StartError(format!(
            "This binary is a plugin for Terraform and is not meant to be run by hand. \
             Declare `{source}` in a configuration's required_providers and run `terraform init`; \
             to debug it, start it with --debug and follow the instructions it prints."
        )));
    }
    if let Ok(versions) = std::env::var("PLUGIN_PROTOCOL_VERSIONS")
        && !versions
            .split(',')
            .any(|v| v.trim() == PROTOCOL_VERSION.to_string())
    {
        return Err(StartError(format!(
            "Terraform offered plugin protocol versions {versions}, but this provider speaks only \
                version {PROTOCOL_VERSION} (Terraform 1.0 or later)."
        )));
    }
    Ok(())
}

enum Listener {
    Unix(UnixListener, PathBuf),
    Tcp(TcpListener),
}

/// A private directory for the socket: only the owner may enter it, so no other user can reach
/// the socket even before the TLS handshake. Named after the provider's type, so that a stale
/// one says whose it was.
fn unix_listener(type_name: &str) -> std::io::Result<(UnixListener, PathBuf)> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let base = std::env::var_os("PLUGIN_UNIX_SOCKET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = base.join(format!(
        "{type_name}-plugin-{}-{:08x}",
        std::process::id(),
        fastrand::u32(..)
    ));
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    let path = dir.join("plugin.sock");
    let listener = UnixListener::bind(&path)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    Ok((listener, path))
}

async fn tcp_listener() -> std::io::Result<TcpListener> {
    let port = |k: &str, d: u16| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let (min, max) = (
        port("PLUGIN_MIN_PORT", 10000),
        port("PLUGIN_MAX_PORT", 25000),
    );
    if min > max {
        return Err(std::io::Error::other(format!(
            "PLUGIN_MIN_PORT {min} is above PLUGIN_MAX_PORT {max}"
        )));
    }
    let span = u32::from(max - min) + 1;
    let start = fastrand::u32(..span);
    let mut last = None;
    for i in 0..span {
        let p = min + ((start + i) % span) as u16;
        match TcpListener::bind(("127.0.0.1", p)).await {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no port in range")))
}

/// `<TYPE>_PLUGIN_TRANSPORT=tcp` (the provider's type in capitals) skips the unix socket, so
/// that tests can reach the TCP fallback.
async fn listen(type_name: &str) -> Result<Listener, StartError> {
    let transport =
        format!("{}_PLUGIN_TRANSPORT", type_name.to_ascii_uppercase()).replace('-', "_");
    let want_tcp = std::env::var(transport).as_deref() == Ok("tcp");
    if !want_tcp {
        match unix_listener(type_name) {
            Ok((l, p)) => return Ok(Listener::Unix(l, p)),
            Err(e) => {
                tracing::warn!(error = %e, "unix socket unavailable; falling back to TCP on \
                    127.0.0.1")
            }
        }
    }
    tcp_listener()
        .await
        .map(Listener::Tcp)
        .map_err(|e| StartError(format!("could not listen on 127.0.0.1: {e}")))
}

/// Any accepted connection, TLS or not, unix or TCP.
trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

struct Conn(Box<dyn Io>);

impl Connected for Conn {
    type ConnectInfo = ();
    fn connect_info(&self) {}
}

impl AsyncRead for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut *self.0).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.0).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.0).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut *self.0).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }
}

/// Accepts connections forever, completing TLS off the accept loop so that a slow or hostile
/// client cannot hold up the next one. Connections that fail the handshake never reach gRPC.
fn accept_loop(
    listener: Listener,
    tls: Option<Arc<rustls::ServerConfig>>,
    tx: mpsc::Sender<std::io::Result<Conn>>,
) {
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    tokio::spawn(async move {
        loop {
            let stream: Box<dyn Io> = match &listener {
                Listener::Unix(l, _) => match l.accept().await {
                    Ok((s, _)) => Box::new(s),
                    Err(_) => continue,
                },
                Listener::Tcp(l) => match l.accept().await {
                    Ok((s, _)) => {
                        // Small gRPC frames must not wait for delayed ACKs.
                        let _ = s.set_nodelay(true);
                        Box::new(s)
                    }
                    Err(_) => continue,
                },
            };
            let tx = tx.clone();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let conn = match acceptor {
                    None => Conn(stream),
                    Some(a) => {
                        match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, a.accept(stream)).await {
                            Ok(Ok(s)) => Conn(Box::new(s)),
                            Ok(Err(e)) => {
                                tracing::warn!(error = %e, "refused a connection: TLS handshake \
                                    failed");
                                return;
                            }
                            Err(_) => return,
                        }
                    }
                };
                let _ = tx.send(Ok(conn)).await;
            });
        }
    });
}

/// Serves `provider` to the terraform that started it (the go-plugin handshake, AutoMTLS, the
/// tfplugin6 service) until terraform hangs up or stops it.
pub async fn serve(provider: Arc<dyn Provider>, opts: Options) -> Result<(), StartError> {
    if !opts.debug {
        check_started_by_terraform(opts.address)?;
    }
    let (tls_config, cert_field) = auto_mtls(opts.debug)?;

    let type_name = provider.type_name();
    let listener = listen(type_name).await?;
    let (network, address, socket_path) = match &listener {
        Listener::Unix(_, p) => ("unix", p.display().to_string(), Some(p.clone())),
        Listener::Tcp(l) => (
            "tcp",
            l.local_addr().map(|a| a.to_string()).unwrap_or_default(),
            None,
        ),
    };

    let shutdown = Arc::new(Notify::new());
    let (tx, rx) = mpsc::channel(64);
    accept_loop(listener, tls_config, tx);

    if opts.debug {
        let reattach = serde_json::json!({
            opts.address: {
                "Protocol": "grpc",
                "ProtocolVersion": PROTOCOL_VERSION,
                "Pid": std::process::id(),
                "Test": true,
                "Addr": {"Network": network, "String": address},
            }
        });
        println!(
            "terraform-provider-{type_name} is running in debug mode. In the shell where you run \
                terraform, set:\n\n\tTF_REATTACH_PROVIDERS='{reattach}'\n\nStop it with Ctrl-C."
        );
    } else {
        println!("1|{PROTOCOL_VERSION}|{network}|{address}|grpc|{cert_field}");
    }
    let _ = std::io::stdout().flush();

    // The types and their schemas are built after the handshake line, while terraform connects
    // and completes its TLS handshake (the accept loop above runs it on another worker): the
    // connection waits in the channel until the server below takes it.
    let registry = Arc::new(Registry::new(provider));
    let provider_svc = ProviderServer::new(ProviderService::new(registry))
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    let server = tonic::transport::Server::builder()
        .add_service(provider_svc)
        .add_service(HealthServer::new(Health))
        .add_service(ppb::grpc_controller_server::GrpcControllerServer::new(
            Controller {
                shutdown: shutdown.clone(),
            },
        ))
        .add_service(ppb::grpc_stdio_server::GrpcStdioServer::new(Stdio))
        .add_service(ppb::grpc_broker_server::GrpcBrokerServer::new(Broker));

    let result = until_stopped(server, rx, shutdown, opts.debug).await;
    if let Some(p) = socket_path {
        cleanup_socket(&p);
    }
    result
}

/// Terraform sets PLUGIN_CLIENT_CERT unless TF_DISABLE_PLUGIN_TLS is set; like go-plugin, the
/// provider serves in plain text only when it is absent. The TLS config, and the server's
/// certificate as the handshake line carries it (empty in plain text).
fn auto_mtls(debug: bool) -> Result<(Option<Arc<rustls::ServerConfig>>, String), StartError> {
    let client_cert = if debug {
        None
    } else {
        std::env::var("PLUGIN_CLIENT_CERT")
            .ok()
            .filter(|c| !c.is_empty())
    };
    let Some(pem) = client_cert else {
        return Ok((None, String::new()));
    };
    let identity = tls::server_identity()
        .map_err(|e| StartError(format!("certificate generation failed: {e}")))?;
    let config = tls::server_config(&identity, &pem).map_err(StartError)?;
    let cert = base64::engine::general_purpose::STANDARD_NO_PAD.encode(&identity.cert_der);
    Ok((Some(Arc::new(config)), cert))
}

/// Serves the connections that come through `incoming` until terraform calls Shutdown (`shutdown`)
/// or the process is told to end.
async fn until_stopped(
    server: tonic::transport::server::Router,
    incoming: mpsc::Receiver<std::io::Result<Conn>>,
    shutdown: Arc<Notify>,
    debug: bool,
) -> Result<(), StartError> {
    // Shutdown must start both the graceful stop and the fallback timer below. One waiter turns
    // the Notify (whose notify_one wakes a single waiter, or stores a permit if none waits yet) into
    // a watch that every waiter sees: with two Notify waiters only one woke, and when it was the
    // timer every plugin process lingered 300 ms after terraform had closed its connection.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.notified().await;
        let _ = stop_tx.send(true);
    });
    let stop = {
        let mut stop_rx = stop_rx.clone();
        async move {
            tokio::select! {
                _ = stop_rx.wait_for(|s| *s) => {}
                () = terminate_signal(debug) => {}
            }
        }
    };
    let served = server
        .serve_with_incoming_shutdown(tokio_stream::wrappers::ReceiverStream::new(incoming), stop);
    tokio::pin!(served);
    let mut stop_rx = stop_rx;
    let stopping = async move {
        // Graceful shutdown waits for open streams (stdio stays open until terraform closes its
        // connection), so give in-flight calls a moment and then leave: terraform kills the process
        // after 2 s anyway.
        if stop_rx.wait_for(|s| *s).await.is_err() {
            return std::future::pending().await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    tokio::select! {
        r = &mut served => r.map_err(|e| StartError(format!("gRPC server failed: {e}"))),
        () = stopping => Ok(()),
    }
}

/// SIGTERM ends the process. SIGINT is ignored unless debugging: on Ctrl-C terraform signals the
/// whole process group and then asks politely with StopProvider, and the provider must stay alive
/// to return what it has created.
async fn terminate_signal(debug: bool) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        return std::future::pending().await;
    };
    let Ok(mut int) = signal(SignalKind::interrupt()) else {
        return std::future::pending().await;
    };
    loop {
        tokio::select! {
            _ = term.recv() => return,
            _ = int.recv() => if debug { return },
        }
    }
}

fn cleanup_socket(path: &Path) {
    let _ = std::fs::remove_file(path);
    if let Some(dir) = path.parent() {
        let _ = std::fs::remove_dir(dir);
    }
}
