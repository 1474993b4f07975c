//! Certificates made at test time with rcgen: a CA, node certificates
//! (127.0.0.1 IP SAN, server + client auth, as docs/SECURITY.md's openssl
//! recipe makes them) and a TLS client speaking RESP over rustls.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use crate::harness::{decode, encode_cmd, Reply, Server};

/// A certificate authority whose files live in `dir`.
pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
    pub dir: PathBuf,
    pub cert: PathBuf,
}

/// A certificate and its key on disk.
#[derive(Clone)]
pub struct Pair {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Ca {
    pub fn new(dir: &Path, name: &str) -> Ca {
        std::fs::create_dir_all(dir).unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let cert = dir.join(format!("{name}.crt"));
        std::fs::write(&cert, issuer.pem()).unwrap();
        Ca {
            issuer,
            dir: dir.to_path_buf(),
            cert,
        }
    }

    /// A node/client certificate for 127.0.0.1 and localhost, usable for
    /// both ends of a connection.
    pub fn issue(&self, name: &str) -> Pair {
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params
            .subject_alt_names
            .push(SanType::IpAddress([127, 0, 0, 1].into()));
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let pair = Pair {
            cert: self.dir.join(format!("{name}.crt")),
            key: self.dir.join(format!("{name}.key")),
        };
        std::fs::write(&pair.cert, cert.pem()).unwrap();
        std::fs::write(&pair.key, key.serialize_pem()).unwrap();
        pair
    }
}

/// `--tls-*` arguments for a node using `pair` and trusting `ca`.
pub fn tls_args(ca: &Path, pair: &Pair) -> Vec<String> {
    [
        "--tls-cert-file",
        pair.cert.to_str().unwrap(),
        "--tls-key-file",
        pair.key.to_str().unwrap(),
        "--tls-ca-cert-file",
        ca.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// The `tls=<P>` field of the server's ready line.
pub fn tls_port(s: &Server) -> u16 {
    let out = s.output();
    let line = out
        .lines()
        .rev()
        .find(|l| l.starts_with("disque-server ready "))
        .unwrap_or_else(|| panic!("no ready line: {out}"));
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("tls="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no tls= in the ready line: {line}"))
}

const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// A blocking RESP client over rustls.
pub struct TlsClient {
    tls: rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
    buf: Vec<u8>,
}

impl TlsClient {
    /// Connect and complete the handshake, trusting `ca`, presenting
    /// `client` when given.
    pub fn connect(port: u16, ca: &Path, client: Option<&Pair>) -> io::Result<TlsClient> {
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(ca).map_err(io::Error::other)? {
            roots
                .add(c.map_err(io::Error::other)?)
                .map_err(io::Error::other)?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(io::Error::other)?
            .with_root_certificates(roots);
        let config = match client {
            Some(p) => {
                let certs = CertificateDer::pem_file_iter(&p.cert)
                    .map_err(io::Error::other)?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(io::Error::other)?;
                let key = PrivateKeyDer::from_pem_file(&p.key).map_err(io::Error::other)?;
                builder
                    .with_client_auth_cert(certs, key)
                    .map_err(io::Error::other)?
            }
            None => builder.with_no_client_auth(),
        };
        let name = ServerName::try_from("127.0.0.1").map_err(io::Error::other)?;
        let conn =
            rustls::ClientConnection::new(Arc::new(config), name).map_err(io::Error::other)?;
        let sock = TcpStream::connect(("127.0.0.1", port))?;
        sock.set_read_timeout(Some(IO_TIMEOUT))?;
        sock.set_write_timeout(Some(IO_TIMEOUT))?;
        let mut tls = rustls::StreamOwned::new(conn, sock);
        while tls.conn.is_handshaking() {
            tls.conn.complete_io(&mut tls.sock)?;
        }
        Ok(TlsClient {
            tls,
            buf: Vec::new(),
        })
    }

    /// Send a command and read its reply; Err when the server refuses the
    /// session (e.g. a rejected client certificate under TLS 1.3 shows up
    /// here) or closes.
    pub fn try_cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) -> io::Result<Reply> {
        self.tls.write_all(&encode_cmd(args))?;
        self.tls.flush()?;
        self.read_reply()
    }

    pub fn read_reply(&mut self) -> io::Result<Reply> {
        loop {
            if let Some((r, used)) = decode(&self.buf).map_err(io::Error::other)? {
                self.buf.drain(..used);
                return Ok(r);
            }
            let mut tmp = [0u8; 16384];
            let n = self.tls.read(&mut tmp)?;
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "closed"));
            }
            self.buf.extend_from_slice(&tmp[..n]);
        }
    }

    /// The negotiated protocol version and cipher suite, as rustls names them.
    pub fn negotiated(&self) -> (String, String) {
        (
            format!("{:?}", self.tls.conn.protocol_version()),
            format!(
                "{:?}",
                self.tls.conn.negotiated_cipher_suite().map(|s| s.suite())
            ),
        )
    }

    /// Send without reading the reply.
    pub fn tls_send<A: AsRef<[u8]>>(&mut self, args: &[A]) {
        self.tls.write_all(&encode_cmd(args)).expect("TLS write");
        self.tls.flush().expect("TLS flush");
    }

    /// The TLS stream itself (for protocols other than RESP).
    pub fn stream(&mut self) -> &mut (impl Read + Write) {
        &mut self.tls
    }

    #[track_caller]
    pub fn cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Reply {
        self.try_cmd(args).expect("TLS command")
    }
}
