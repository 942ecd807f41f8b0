//! AutoMTLS as go-plugin does it: the plugin makes a fresh self-signed server certificate per
//! process and announces it in the handshake line; terraform announces its own client
//! certificate in PLUGIN_CLIENT_CERT. Each side trusts exactly the other's certificate.
//!
//! Terraform's client certificate is a self-signed P-521 CA certificate. WebPKI refuses a CA
//! certificate as an end entity, and ring cannot verify P-521, so the verifier below accepts the
//! one certificate by byte comparison and checks the handshake signature with aws-lc-rs.

use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, Error, ServerConfig, SignatureScheme};

pub(crate) struct ServerIdentity {
    pub(crate) cert_der: Vec<u8>,
    key_der: Vec<u8>,
}

/// A new self-signed certificate for "localhost", valid as its own root (terraform verifies the
/// server against a pool holding only this certificate).
pub(crate) fn server_identity() -> Result<ServerIdentity, String> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
        KeyUsagePurpose,
    };
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(|e| e.to_string())?;
    let mut params =
        CertificateParams::new(vec!["localhost".to_string()]).map_err(|e| e.to_string())?;
    params
        .distinguished_name
        .push(DnType::OrganizationName, "HashiCorp");
    params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
        KeyUsagePurpose::KeyCertSign,
    ];
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let now = std::time::SystemTime::now();
    params.not_before = (now - std::time::Duration::from_secs(30)).into();
    params.not_after = (now + std::time::Duration::from_secs(60 * 60 * 24 * 365)).into();
    let cert = params.self_signed(&key).map_err(|e| e.to_string())?;
    Ok(ServerIdentity {
        cert_der: cert.der().to_vec(),
        key_der: key.serialize_der(),
    })
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// The server side of AutoMTLS: our certificate, and exactly one acceptable client certificate.
pub(crate) fn server_config(
    identity: &ServerIdentity,
    client_cert_pem: &str,
) -> Result<ServerConfig, String> {
    let client = CertificateDer::from_pem_slice(client_cert_pem.as_bytes())
        .map_err(|e| format!("PLUGIN_CLIENT_CERT is not a PEM certificate: {e}"))?;
    let provider = provider();
    let verifier = Arc::new(ExactClientCert {
        expected: client.as_ref().to_vec(),
        algorithms: provider.signature_verification_algorithms,
    });
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![CertificateDer::from(identity.cert_der.clone())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(identity.key_der.clone())),
        )
        .map_err(|e| e.to_string())?;
    // gRPC clients insist on HTTP/2 being negotiated.
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

#[derive(Debug)]
struct ExactClientCert {
    expected: Vec<u8>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ClientCertVerifier for ExactClientCert {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, Error> {
        if end_entity.as_ref() == self.expected.as_slice() {
            Ok(ClientCertVerified::assertion())
        } else {
            Err(Error::General(
                "client certificate is not the one terraform announced".into(),
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}
