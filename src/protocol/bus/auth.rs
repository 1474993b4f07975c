//! Shared-secret authentication of bus connections (`cluster-secret`, our
//! extension: Disque's bus is unauthenticated). Mutual challenge-response
//! with HMAC-SHA256 (RustCrypto `hmac` + `sha2`), so neither side learns
//! the secret and a peer that does not know it can neither join nor
//! receive a byte of job data:
//!
//! 1. acceptor -> AUTHCHALLENGE { nA }
//! 2. connector -> AUTH { nC, HMAC(secret, "disque-bus-c" | nA | nC) }
//! 3. acceptor -> AUTH { nA, HMAC(secret, "disque-bus-a" | nC | nA) }
//!
//! Both nonces are fresh random 128-bit values, so a recorded handshake
//! cannot be replayed against either side: each proof covers a nonce the
//! verifier just chose. Only then are the connection's frames handed to
//! the engine. Proofs are checked in constant time (`Mac::verify_slice`).

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

const CONNECTOR_LABEL: &[u8] = b"disque-bus-c";
const ACCEPTOR_LABEL: &[u8] = b"disque-bus-a";

fn mac(secret: &[u8], label: &[u8], first: &[u8; 16], second: &[u8; 16]) -> HmacSha256 {
    // HMAC accepts keys of any length (long keys are hashed first).
    let mut m = <HmacSha256 as KeyInit>::new_from_slice(secret)
        .unwrap_or_else(|_| <HmacSha256 as KeyInit>::new(&Default::default()));
    m.update(label);
    m.update(first);
    m.update(second);
    m
}

/// The connector's proof for challenge `n_a` and its own nonce `n_c`.
pub fn connector_mac(secret: &[u8], n_a: &[u8; 16], n_c: &[u8; 16]) -> [u8; 32] {
    mac(secret, CONNECTOR_LABEL, n_a, n_c)
        .finalize()
        .into_bytes()
        .into()
}

/// The acceptor's proof, answering the connector's nonce.
pub fn acceptor_mac(secret: &[u8], n_c: &[u8; 16], n_a: &[u8; 16]) -> [u8; 32] {
    mac(secret, ACCEPTOR_LABEL, n_c, n_a)
        .finalize()
        .into_bytes()
        .into()
}

/// Constant-time check of the connector's proof.
pub fn verify_connector(secret: &[u8], n_a: &[u8; 16], n_c: &[u8; 16], proof: &[u8]) -> bool {
    mac(secret, CONNECTOR_LABEL, n_a, n_c)
        .verify_slice(proof)
        .is_ok()
}

/// Constant-time check of the acceptor's proof.
pub fn verify_acceptor(secret: &[u8], n_c: &[u8; 16], n_a: &[u8; 16], proof: &[u8]) -> bool {
    mac(secret, ACCEPTOR_LABEL, n_c, n_a)
        .verify_slice(proof)
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn hmac_is_rfc4231_hmac_sha256() {
        // RFC 4231 test case 2, fed through the same construction.
        let mut m = <HmacSha256 as KeyInit>::new_from_slice(b"Jefe").unwrap();
        m.update(b"what do ya want for nothing?");
        assert_eq!(
            hex(&m.finalize().into_bytes()),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn proofs_differ_by_role_secret_and_nonce() {
        let (a, c) = ([1u8; 16], [2u8; 16]);
        let m1 = connector_mac(b"s", &a, &c);
        assert!(verify_connector(b"s", &a, &c, &m1));
        assert!(!verify_connector(b"t", &a, &c, &m1), "other secret");
        assert!(
            !verify_connector(b"s", &[3u8; 16], &c, &m1),
            "replayed against a new challenge"
        );
        assert!(!verify_acceptor(b"s", &c, &a, &m1), "role swap");
        let m2 = acceptor_mac(b"s", &c, &a);
        assert!(verify_acceptor(b"s", &c, &a, &m2));
        assert!(!verify_acceptor(b"s", &c, &a, &m2[..31]), "truncated");
    }

    #[test]
    fn long_secrets_work() {
        let secret = vec![7u8; 200];
        let (a, c) = ([9u8; 16], [8u8; 16]);
        assert!(verify_connector(
            &secret,
            &a,
            &c,
            &connector_mac(&secret, &a, &c)
        ));
    }
}
