//! TLS: a node with `--tls-port 0` and client authentication (the
//! default `tls-auth-clients yes`), certificates made here with rcgen.

use std::path::{Path, PathBuf};

use disque_client::{AddJob, Client, TlsOptions};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};

use crate::harness::Node;

struct Pki {
    dir: PathBuf,
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Pki {
    fn new() -> Pki {
        Pki::new_in("ca")
    }

    fn ca(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// A certificate for 127.0.0.1 usable by either end.
    fn issue(&self, name: &str) -> (PathBuf, PathBuf) {
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
        let (c, k) = (
            self.dir.join(format!("{name}.crt")),
            self.dir.join(format!("{name}.key")),
        );
        std::fs::write(&c, cert.pem()).unwrap();
        std::fs::write(&k, key.serialize_pem()).unwrap();
        (c, k)
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_custom_ca_and_client_certificate() {
    let pki = Pki::new();
    let (cert, key) = pki.issue("node");
    let ca = pki.ca();
    let node = Node::start(&[
        "--tls-port",
        "0",
        "--tls-cert-file",
        s(&cert),
        "--tls-key-file",
        s(&key),
        "--tls-ca-cert-file",
        s(&ca),
    ])
    .await;
    let tls_port = node.ready_field("tls=").expect("tls= in the ready line");
    let addr = format!("127.0.0.1:{tls_port}");
    let (ccert, ckey) = pki.issue("client");

    let tls = TlsOptions::new()
        .root_ca_file(&ca)
        .unwrap()
        .client_cert_files(&ccert, &ckey)
        .unwrap();
    let mut c = Client::builder([addr.as_str()])
        .tls(tls)
        .connect()
        .await
        .unwrap();
    c.ping().await.unwrap();
    let id = c.add_job(&AddJob::new("tq", "secret")).await.unwrap();
    let job = c
        .get_job("tq", std::time::Duration::from_secs(1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((&job.id, &job.body[..]), (&id, &b"secret"[..]));
    assert!(c.ack_job(&id).await.unwrap());
    // TLS hides the plain-text ports HELLO lists: only the given address
    // is used for failover.
    assert_eq!(c.current_addr(), Some(addr.as_str()));

    // Without a client certificate the node refuses the connection (with
    // TLS 1.3 the refusal arrives at the first read, the handshake's HELLO).
    let e = Client::builder([addr.as_str()])
        .tls(TlsOptions::new().root_ca_file(&ca).unwrap())
        .connect()
        .await
        .unwrap_err();
    assert!(e.is_connection_error(), "{e}");

    // A server certificate from an unknown CA is rejected.
    let other = Pki::new_in("other-ca");
    let e = Client::builder([addr.as_str()])
        .tls(
            TlsOptions::new()
                .root_ca_file(other.ca())
                .unwrap()
                .client_cert_files(&ccert, &ckey)
                .unwrap(),
        )
        .connect()
        .await
        .unwrap_err();
    assert!(e.is_connection_error(), "{e}");

    // Broken PEM is a TLS set-up error, before any connection.
    let e = Client::builder([addr.as_str()])
        .tls(TlsOptions::new().root_ca_pem("not a certificate"))
        .build()
        .unwrap_err();
    assert!(matches!(e, disque_client::Error::Tls(_)), "{e}");
}

impl Pki {
    /// A second, unrelated CA in its own directory.
    fn new_in(tag: &str) -> Pki {
        let dir =
            std::env::temp_dir().join(format!("disque-client-pki-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, tag);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        std::fs::write(dir.join("ca.crt"), issuer.pem()).unwrap();
        Pki { dir, issuer }
    }
}
