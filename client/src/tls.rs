//! TLS settings (feature `tls`): rustls with the ring provider, PEM files.

use std::path::Path;
use std::sync::Arc;

use tokio_rustls::TlsConnector;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use crate::error::{Error, Result};

/// How to connect with TLS: which certificate authorities to trust, an
/// optional client certificate (for nodes with `tls-auth-clients yes`,
/// the default) and the name to verify.
///
/// Without [`root_ca_pem`](Self::root_ca_pem) or
/// [`root_ca_file`](Self::root_ca_file) the system's trusted roots are
/// used.
///
/// ```no_run
/// use disque_client::{Client, TlsOptions};
///
/// # async fn run() -> Result<(), disque_client::Error> {
/// let tls = TlsOptions::new()
///     .root_ca_file("/etc/disque/ca.crt")?
///     .client_cert_files("/etc/disque/client.crt", "/etc/disque/client.key")?;
/// let mut client = Client::builder(&["10.0.0.5:7712"]).tls(tls).connect().await?;
/// client.ping().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default)]
pub struct TlsOptions {
    root_ca_pem: Option<Vec<u8>>,
    client_cert: Option<(Vec<u8>, Vec<u8>)>,
    server_name: Option<String>,
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::Tls(format!("reading {}: {e}", path.display())))
}

impl TlsOptions {
    /// TLS trusting the system's roots, without a client certificate.
    ///
    /// ```
    /// let tls = disque_client::TlsOptions::new().server_name("disque.internal");
    /// # let _ = tls;
    /// ```
    pub fn new() -> TlsOptions {
        TlsOptions::default()
    }

    /// Trust only the certificate authorities in this PEM text (one or
    /// more `CERTIFICATE` blocks) instead of the system's roots.
    ///
    /// ```
    /// let pem = std::fs::read("ca.crt").unwrap_or_default();
    /// let tls = disque_client::TlsOptions::new().root_ca_pem(pem);
    /// # let _ = tls;
    /// ```
    pub fn root_ca_pem(mut self, pem: impl Into<Vec<u8>>) -> TlsOptions {
        self.root_ca_pem = Some(pem.into());
        self
    }

    /// [`root_ca_pem`](Self::root_ca_pem) from a file.
    ///
    /// ```no_run
    /// let tls = disque_client::TlsOptions::new().root_ca_file("ca.crt")?;
    /// # let _ = tls;
    /// # Ok::<(), disque_client::Error>(())
    /// ```
    pub fn root_ca_file(self, path: impl AsRef<Path>) -> Result<TlsOptions> {
        Ok(self.root_ca_pem(read(path.as_ref())?))
    }

    /// Present this client certificate chain and private key (PEM).
    ///
    /// ```
    /// let (cert, key) = (Vec::new(), Vec::new()); // PEM text of both
    /// let tls = disque_client::TlsOptions::new().client_cert_pem(cert, key);
    /// # let _ = tls;
    /// ```
    pub fn client_cert_pem(
        mut self,
        cert_chain: impl Into<Vec<u8>>,
        key: impl Into<Vec<u8>>,
    ) -> TlsOptions {
        self.client_cert = Some((cert_chain.into(), key.into()));
        self
    }

    /// [`client_cert_pem`](Self::client_cert_pem) from files.
    ///
    /// ```no_run
    /// let tls = disque_client::TlsOptions::new().client_cert_files("client.crt", "client.key")?;
    /// # let _ = tls;
    /// # Ok::<(), disque_client::Error>(())
    /// ```
    pub fn client_cert_files(
        self,
        cert_chain: impl AsRef<Path>,
        key: impl AsRef<Path>,
    ) -> Result<TlsOptions> {
        let cert = read(cert_chain.as_ref())?;
        let key = read(key.as_ref())?;
        Ok(self.client_cert_pem(cert, key))
    }

    /// Verify the server's certificate against this name (DNS name or IP)
    /// instead of the host part of each node's address.
    ///
    /// ```
    /// let tls = disque_client::TlsOptions::new().server_name("queue.example.com");
    /// # let _ = tls;
    /// ```
    pub fn server_name(mut self, name: impl Into<String>) -> TlsOptions {
        self.server_name = Some(name.into());
        self
    }

    pub(crate) fn build(&self) -> Result<Tls> {
        let mut roots = rustls::RootCertStore::empty();
        match &self.root_ca_pem {
            Some(pem) => {
                for cert in CertificateDer::pem_slice_iter(pem) {
                    let cert = cert.map_err(|e| Error::Tls(format!("root CA PEM: {e}")))?;
                    roots
                        .add(cert)
                        .map_err(|e| Error::Tls(format!("root CA certificate: {e}")))?;
                }
            }
            None => {
                let found = rustls_native_certs::load_native_certs();
                // Unreadable system certificates are skipped, as browsers
                // do; an empty store is reported below.
                for cert in found.certs {
                    let _ = roots.add(cert);
                }
            }
        }
        if roots.is_empty() {
            return Err(Error::Tls("no trusted root certificate".into()));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Tls(e.to_string()))?
            .with_root_certificates(roots);
        let config = match &self.client_cert {
            Some((cert, key)) => {
                let chain = CertificateDer::pem_slice_iter(cert)
                    .collect::<std::result::Result<Vec<_>, _>>()
                    .map_err(|e| Error::Tls(format!("client certificate PEM: {e}")))?;
                if chain.is_empty() {
                    return Err(Error::Tls(
                        "client certificate PEM has no certificate".into(),
                    ));
                }
                let key = PrivateKeyDer::from_pem_slice(key)
                    .map_err(|e| Error::Tls(format!("client key PEM: {e}")))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| Error::Tls(format!("client certificate: {e}")))?
            }
            None => builder.with_no_client_auth(),
        };
        Ok(Tls {
            connector: TlsConnector::from(Arc::new(config)),
            server_name: self.server_name.clone(),
        })
    }
}

/// A ready connector, built once per client from [`TlsOptions`].
#[derive(Clone)]
pub(crate) struct Tls {
    pub(crate) connector: TlsConnector,
    server_name: Option<String>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl Tls {
    /// The name to verify for a node at `host`.
    pub(crate) fn name_for(&self, host: &str) -> Result<ServerName<'static>> {
        let name = self.server_name.as_deref().unwrap_or(host);
        ServerName::try_from(name.to_string())
            .map_err(|e| Error::Tls(format!("server name {name:?}: {e}")))
    }
}
