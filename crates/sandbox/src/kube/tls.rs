//! HTTPS for the API servers. kubectl (client-go's clientcmd) only sends a kubeconfig's bearer token when the
//! server URL is https, so token auth needs TLS: a sandbox CA signs one serving certificate for 127.0.0.1 and
//! localhost, and every kubeconfig carries the CA as certificate-authority-data.

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// The CA and serving certificate (DER, base64 in snapshots) and the serving key (PKCS#8 DER).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TlsIdentity {
    #[serde(with = "b64")]
    pub ca_der: Vec<u8>,
    #[serde(with = "b64")]
    pub(crate) cert_der: Vec<u8>,
    #[serde(with = "b64")]
    pub(crate) key_der: Vec<u8>,
}

mod b64 {
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(v))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_err(serde::de::Error::custom)
    }
}

impl TlsIdentity {
    pub(crate) fn generate() -> Result<Self, String> {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
        };
        let e = |e: rcgen::Error| e.to_string();
        let ca_key = KeyPair::generate().map_err(e)?;
        let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(e)?;
        ca.distinguished_name
            .push(DnType::CommonName, "fracgpu-sandbox-ca");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca.self_signed(&ca_key).map_err(e)?;
        let issuer = Issuer::new(ca, ca_key);
        let key = KeyPair::generate().map_err(e)?;
        let mut leaf = CertificateParams::new(vec![
            "127.0.0.1".to_string(),
            "localhost".to_string(),
            "::1".to_string(),
        ])
        .map_err(e)?;
        leaf.distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        let cert = leaf.signed_by(&key, &issuer).map_err(e)?;
        Ok(TlsIdentity {
            ca_der: ca_cert.der().to_vec(),
            cert_der: cert.der().to_vec(),
            key_der: key.serialize_der(),
        })
    }

    /// The CA certificate in PEM, as kubeconfigs and curl --cacert want it.
    pub(crate) fn ca_pem(&self) -> String {
        let b = base64::engine::general_purpose::STANDARD.encode(&self.ca_der);
        let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
        for chunk in b.as_bytes().chunks(64) {
            out.push_str(std::str::from_utf8(chunk).unwrap_or_default());
            out.push('\n');
        }
        out.push_str("-----END CERTIFICATE-----\n");
        out
    }

    pub(crate) fn acceptor(&self) -> Result<TlsAcceptor, String> {
        use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(
                vec![
                    CertificateDer::from(self.cert_der.clone()),
                    CertificateDer::from(self.ca_der.clone()),
                ],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone())),
            )
            .map_err(|e| e.to_string())?;
        cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(cfg)))
    }
}

/// A TCP listener that completes a TLS handshake before handing a connection to `axum::serve`.
pub(crate) struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
}

impl TlsListener {
    pub(crate) fn new(tcp: TcpListener, identity: &TlsIdentity) -> Result<Self, String> {
        Ok(TlsListener {
            tcp,
            acceptor: identity.acceptor()?,
        })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let (tcp, addr) = match self.tcp.accept().await {
                Ok(x) => x,
                Err(_) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            // A client that never finishes its handshake must not stall the listener for long.
            if let Ok(Ok(tls)) =
                tokio::time::timeout(Duration::from_secs(5), self.acceptor.accept(tcp)).await
            {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}
