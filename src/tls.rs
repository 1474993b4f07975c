//! TLS with rustls (ring provider, no OpenSSL): rustls configurations built
//! from the `tls-*` directives (Redis 6's names), and the live state the
//! listeners read for every new connection. CONFIG SET of a `tls-*`
//! parameter rebuilds everything from the files and swaps it in at once;
//! established connections keep the session they negotiated.
//!
//! * Client port: the node's certificate; `tls-auth-clients` decides whether
//!   clients must present one signed by the configured CA.
//! * Cluster bus (`tls-cluster yes`): mutual TLS. Both sides present the
//!   node certificate and verify the other's chain against the CA. Peers
//!   are dialled by IP address, which moves with containers and DHCP, so
//!   the connector checks the chain, validity and key usage but not the
//!   name: any certificate issued by the cluster CA is a cluster member
//!   (docs/SECURITY.md: use a CA dedicated to the cluster).

use std::path::Path;
use std::sync::{Arc, RwLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::{ParsedCertificate, WebPkiClientVerifier};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use crate::config::security::{parse_protocols, TlsAuthClients, TlsConfig};

/// What the bus uses on both ends of a connection.
#[derive(Clone)]
pub struct BusTls {
    pub acceptor: TlsAcceptor,
    pub connector: TlsConnector,
}

#[derive(Clone, Default)]
struct Built {
    clients: Option<TlsAcceptor>,
    bus: Option<BusTls>,
}

/// Why the `tls-*` configuration cannot be loaded (startup refuses to
/// start; CONFIG SET keeps the old configuration). Texts name the
/// directive or file at fault.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// `tls-protocols` names an unsupported version.
    #[error(transparent)]
    ProtocolList(#[from] crate::config::UnsupportedTlsProtocol),
    #[error("TLS needs tls-cert-file and tls-key-file")]
    NoCertOrKey,
    #[error("tls-protocols: {0}")]
    Protocols(#[source] rustls::Error),
    #[error("tls-auth-clients yes/optional needs tls-ca-cert-file or tls-ca-cert-dir")]
    AuthClientsNoCa,
    #[error("tls-cluster needs tls-ca-cert-file or tls-ca-cert-dir")]
    ClusterNoCa,
    #[error("client verifier: {0}")]
    ClientVerifier(#[source] rustls::server::VerifierBuilderError),
    #[error("bus client verifier: {0}")]
    BusVerifier(#[source] rustls::server::VerifierBuilderError),
    #[error("tls-cert-file / tls-key-file: {0}")]
    CertKey(#[source] rustls::Error),
    #[error("tls-ciphersuites: unsupported cipher suite '{name}'")]
    Ciphersuite { name: String },
    #[error("Reading certificates from {path}: {source}")]
    ReadCerts {
        path: String,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("No certificate in {path}")]
    NoCert { path: String },
    #[error("Reading the private key {path}: {source}")]
    ReadKey {
        path: String,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("Reading tls-ca-cert-dir {path}: {source}")]
    ReadCaDir {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("Reading CA certificates from {path}")]
    ReadCa {
        path: String,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("CA certificate in {path}: {source}")]
    BadCa {
        path: String,
        #[source]
        source: rustls::Error,
    },
    #[error("No CA certificate in tls-ca-cert-file / tls-ca-cert-dir")]
    NoCa,
}

/// The TLS configuration in force. Cheap to read: one short read lock and
/// an `Arc` clone per new connection.
#[derive(Default)]
pub struct Tls {
    built: RwLock<Built>,
}

impl Tls {
    /// Build from `cfg` and, only if everything loads, replace what is in
    /// force. Nothing is read when neither a TLS port nor `tls-cluster` is
    /// configured.
    pub fn configure(&self, cfg: &TlsConfig) -> Result<(), TlsError> {
        let built = build(cfg)?;
        *self.built.write().unwrap_or_else(|e| e.into_inner()) = built;
        Ok(())
    }

    /// The acceptor for a new client connection on the TLS port.
    pub fn client_acceptor(&self) -> Option<TlsAcceptor> {
        self.built
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clients
            .clone()
    }

    /// Acceptor and connector for a new bus connection (`tls-cluster yes`).
    pub fn bus(&self) -> Option<BusTls> {
        self.built
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .bus
            .clone()
    }
}

fn build(cfg: &TlsConfig) -> Result<Built, TlsError> {
    if !cfg.clients_enabled() && !cfg.cluster {
        return Ok(Built::default());
    }
    let provider = Arc::new(provider(&cfg.ciphersuites)?);
    let (v12, v13) = parse_protocols(&cfg.protocols)?;
    let mut versions: Vec<&'static rustls::SupportedProtocolVersion> = Vec::new();
    if v12 {
        versions.push(&rustls::version::TLS12);
    }
    if v13 {
        versions.push(&rustls::version::TLS13);
    }
    if cfg.cert_file.is_empty() || cfg.key_file.is_empty() {
        return Err(TlsError::NoCertOrKey);
    }
    let certs = load_certs(&cfg.cert_file)?;
    let key = load_key(&cfg.key_file)?;
    let roots = load_roots(cfg)?;
    let mut built = Built::default();
    if cfg.clients_enabled() {
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(TlsError::Protocols)?;
        let verifier = match cfg.auth_clients {
            TlsAuthClients::No => None,
            mode => {
                let roots = roots.clone().ok_or(TlsError::AuthClientsNoCa)?;
                let b = WebPkiClientVerifier::builder_with_provider(roots, provider.clone());
                let b = if mode == TlsAuthClients::Optional {
                    b.allow_unauthenticated()
                } else {
                    b
                };
                Some(b.build().map_err(TlsError::ClientVerifier)?)
            }
        };
        let builder = match verifier {
            Some(v) => builder.with_client_cert_verifier(v),
            None => builder.with_no_client_auth(),
        };
        let server = builder
            .with_single_cert(certs.clone(), key.clone_key())
            .map_err(TlsError::CertKey)?;
        built.clients = Some(TlsAcceptor::from(Arc::new(server)));
    }
    if cfg.cluster {
        let roots = roots.ok_or(TlsError::ClusterNoCa)?;
        let verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
            .build()
            .map_err(TlsError::BusVerifier)?;
        let server = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(TlsError::Protocols)?
            .with_client_cert_verifier(verifier)
            .with_single_cert(certs.clone(), key.clone_key())
            .map_err(TlsError::CertKey)?;
        let client = ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(TlsError::Protocols)?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ClusterCaVerifier { roots, provider }))
            .with_client_auth_cert(certs, key)
            .map_err(TlsError::CertKey)?;
        built.bus = Some(BusTls {
            acceptor: TlsAcceptor::from(Arc::new(server)),
            connector: TlsConnector::from(Arc::new(client)),
        });
    }
    Ok(built)
}

/// The ring provider, restricted to `tls-ciphersuites` (colon-separated
/// IANA names such as `TLS_AES_256_GCM_SHA384` or
/// `TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`) when given.
fn provider(ciphersuites: &str) -> Result<CryptoProvider, TlsError> {
    let mut p = rustls::crypto::ring::default_provider();
    if ciphersuites.trim().is_empty() {
        return Ok(p);
    }
    let mut chosen = Vec::new();
    for name in ciphersuites
        .split(':')
        .map(str::trim)
        .filter(|n| !n.is_empty())
    {
        let suite = p
            .cipher_suites
            .iter()
            .find(|s| iana_name(s).eq_ignore_ascii_case(name))
            .ok_or_else(|| TlsError::Ciphersuite {
                name: name.to_string(),
            })?;
        chosen.push(*suite);
    }
    p.cipher_suites = chosen;
    Ok(p)
}

/// IANA name of a suite (rustls spells TLS 1.3 ones `TLS13_...`).
fn iana_name(s: &rustls::SupportedCipherSuite) -> String {
    let debug = format!("{:?}", s.suite());
    match debug.strip_prefix("TLS13_") {
        Some(rest) => format!("TLS_{rest}"),
        None => debug,
    }
}

fn load_certs(path: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|source| TlsError::ReadCerts {
            path: path.to_string(),
            source,
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCert {
            path: path.to_string(),
        });
    }
    Ok(certs)
}

fn load_key(path: &str) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|source| TlsError::ReadKey {
        path: path.to_string(),
        source,
    })
}

/// CA certificates from `tls-ca-cert-file` and every PEM file in
/// `tls-ca-cert-dir`; None when neither is configured.
fn load_roots(cfg: &TlsConfig) -> Result<Option<Arc<RootCertStore>>, TlsError> {
    let mut files = Vec::new();
    if !cfg.ca_cert_file.is_empty() {
        files.push(Path::new(&cfg.ca_cert_file).to_path_buf());
    }
    if !cfg.ca_cert_dir.is_empty() {
        let dir = std::fs::read_dir(&cfg.ca_cert_dir).map_err(|source| TlsError::ReadCaDir {
            path: cfg.ca_cert_dir.clone(),
            source,
        })?;
        let mut in_dir: Vec<_> = dir.flatten().map(|e| e.path()).collect();
        in_dir.sort();
        files.extend(in_dir.into_iter().filter(|p| p.is_file()));
    }
    if files.is_empty() {
        return Ok(None);
    }
    let mut roots = RootCertStore::empty();
    for f in &files {
        let name = f.display().to_string();
        // Files in the directory that hold no certificate are skipped.
        let certs = match CertificateDer::pem_file_iter(f)
            .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        {
            Ok(certs) => certs,
            Err(source) if name == cfg.ca_cert_file => {
                return Err(TlsError::ReadCa { path: name, source })
            }
            Err(_) => continue,
        };
        for c in certs {
            roots.add(c).map_err(|source| TlsError::BadCa {
                path: name.clone(),
                source,
            })?;
        }
    }
    if roots.is_empty() {
        return Err(TlsError::NoCa);
    }
    Ok(Some(Arc::new(roots)))
}

/// Bus connector's check of the acceptor: chain to the cluster CA, validity
/// period and server-auth key usage, but not the name (peers are dialled
/// by IP, see the module doc).
#[derive(Debug)]
struct ClusterCaVerifier {
    roots: Arc<RootCertStore>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for ClusterCaVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let cert = ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.provider.signature_verification_algorithms.all,
        )?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cipher_suites_by_iana_name() {
        let p = provider("TLS_AES_256_GCM_SHA384:TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256")
            .unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<String> = p.cipher_suites.iter().map(iana_name).collect();
        assert_eq!(
            names,
            [
                "TLS_AES_256_GCM_SHA384",
                "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"
            ]
        );
        assert!(provider("TLS_RSA_WITH_RC4_128_MD5").is_err());
        assert!(!provider("")
            .map(|p| p.cipher_suites)
            .unwrap_or_default()
            .is_empty());
    }

    #[test]
    fn nothing_is_read_without_a_tls_port_or_tls_cluster() {
        let cfg = TlsConfig {
            cert_file: "/nonexistent".into(),
            ..Default::default()
        };
        let tls = Tls::default();
        assert!(tls.configure(&cfg).is_ok());
        assert!(tls.client_acceptor().is_none() && tls.bus().is_none());
        let cfg = TlsConfig {
            port: Some(0),
            ..cfg
        };
        assert!(tls.configure(&cfg).is_err(), "missing files are reported");
    }
}
