//! Starting the provider binary as terraform does and talking to it over its socket, with or
//! without the client certificate terraform would present.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use base64::Engine;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tonic::transport::{Channel, Endpoint};

pub const COOKIE: &str = "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2";

/// A client identity like terraform's: self-signed ECDSA P-521, IsCA, SAN localhost.
pub struct ClientCert {
    pub pem: String,
    pub der: Vec<u8>,
    pub key_der: Vec<u8>,
}

pub fn client_cert() -> ClientCert {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P521_SHA512).unwrap();
    let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let cert = params.self_signed(&key).unwrap();
    let der = cert.der().to_vec();
    let b64 = base64::engine::general_purpose::STANDARD.encode(&der);
    let body: Vec<&str> = b64
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    let pem = format!(
        "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
        body.join("\n")
    );
    ClientCert {
        pem,
        der,
        key_der: key.serialize_der(),
    }
}

pub struct Handshake {
    pub network: String,
    pub address: String,
    pub server_cert_der: Vec<u8>,
}

pub fn parse_handshake(line: &str) -> Handshake {
    let parts: Vec<&str> = line.trim_end().split('|').collect();
    assert_eq!(parts.len(), 6, "handshake line {line:?}");
    assert_eq!(parts[0], "1", "core protocol version");
    assert_eq!(parts[1], "6", "app protocol version");
    assert_eq!(parts[4], "grpc");
    let server_cert_der = base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(parts[5])
        .expect("certificate is unpadded standard base64");
    Handshake {
        network: parts[2].into(),
        address: parts[3].into(),
        server_cert_der,
    }
}

pub struct Plugin {
    pub child: Child,
    pub handshake: Handshake,
}

impl Drop for Plugin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the provider with terraform's environment and reads its handshake line.
pub fn start(client: &ClientCert, extra_env: &[(&str, &str)]) -> Plugin {
    start_logging_to(client, extra_env, Stdio::null())
}

/// As [`start`], with the provider's stderr (its log) sent to `stderr`.
pub fn start_logging_to(client: &ClientCert, extra_env: &[(&str, &str)], stderr: Stdio) -> Plugin {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_terraform-provider-fracgpu"));
    cmd.env("TF_PLUGIN_MAGIC_COOKIE", COOKIE)
        .env("PLUGIN_PROTOCOL_VERSIONS", "5,6")
        .env("PLUGIN_MIN_PORT", "10000")
        .env("PLUGIN_MAX_PORT", "25000")
        .env("PLUGIN_CLIENT_CERT", &client.pem)
        .env_remove("FRACGPU_PLUGIN_TRANSPORT")
        .stdout(Stdio::piped())
        .stderr(stderr);
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("provider binary starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let handshake = parse_handshake(&line);
    Plugin { child, handshake }
}

/// Trusts exactly the server certificate from the handshake line, as go-plugin's client does.
#[derive(Debug)]
struct ExactServerCert(Vec<u8>, rustls::crypto::WebPkiSupportedAlgorithms);

impl ServerCertVerifier for ExactServerCert {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if end_entity.as_ref() == self.0.as_slice() {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(
                "unexpected server certificate".into(),
            ))
        }
    }
    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(m, c, d, &self.1)
    }
    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(m, c, d, &self.1)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.1.supported_schemes()
    }
}

/// How a test client presents itself.
pub enum Auth<'a> {
    /// TLS with this client certificate (terraform's, or an impostor's).
    Cert(&'a ClientCert),
    /// TLS without any client certificate.
    NoCert,
    /// Plain HTTP/2, no TLS at all.
    Plain,
}

pub async fn connect(h: &Handshake, auth: Auth<'_>) -> Result<Channel, tonic::transport::Error> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let verifier = Arc::new(ExactServerCert(
        h.server_cert_der.clone(),
        provider.signature_verification_algorithms,
    ));
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let tls = match &auth {
        Auth::Cert(c) => Some(
            builder
                .with_client_auth_cert(
                    vec![CertificateDer::from(c.der.clone())],
                    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(c.key_der.clone())),
                )
                .unwrap(),
        ),
        Auth::NoCert => Some(builder.with_no_client_auth()),
        Auth::Plain => None,
    };
    let tls = tls.map(|mut c| {
        c.alpn_protocols = vec![b"h2".to_vec()];
        tokio_rustls::TlsConnector::from(Arc::new(c))
    });
    let (network, address) = (h.network.clone(), h.address.clone());
    Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_| {
            let (network, address, tls) = (network.clone(), address.clone(), tls.clone());
            async move {
                let io: Box<dyn IoStream> = if network == "unix" {
                    Box::new(tokio::net::UnixStream::connect(&address).await?)
                } else {
                    Box::new(tokio::net::TcpStream::connect(&address).await?)
                };
                let io: Box<dyn IoStream> = match tls {
                    Some(t) => Box::new(
                        t.connect(ServerName::try_from("localhost").unwrap(), io)
                            .await?,
                    ),
                    None => io,
                };
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(io))
            }
        }))
        .await
}

pub trait IoStream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> IoStream for T {}
