//! Gates on what can crash or re-point the server, whatever the user's
//! permissions: Redis 7's `enable-debug-command` and
//! `enable-protected-configs` (`no`, `local` or `yes`). `local` admits
//! loopback and Unix-socket connections only.

use std::net::{IpAddr, SocketAddr};

/// Whether a client shown as `addr` (CLIENT LIST's `ip:port`, or
/// `path:0` for a Unix socket) is local. As Redis's `islocalClient`:
/// Unix sockets, 127.0.0.1 and ::1 (an IPv4 client of a dual-stack socket
/// shows as ::ffff:127.0.0.1). Other 127/8 addresses are not local, as in
/// Redis, which is also what lets a test play a remote client.
pub fn is_local(addr: &str) -> bool {
    match addr.parse::<SocketAddr>() {
        Ok(sa) => match sa.ip().to_canonical() {
            IpAddr::V4(v4) => v4.octets() == [127, 0, 0, 1],
            IpAddr::V6(v6) => v6.is_loopback(),
        },
        // Not an address: a Unix socket path.
        Err(_) => true,
    }
}

/// Redis 7's refusal of DEBUG.
pub const DEBUG_REFUSED: &str = "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";

/// CONFIG SET parameters that redirect where the server reads or writes
/// files (Redis 7 marks `dir` and `dbfilename` PROTECTED_CONFIG; ours
/// also covers the certificate paths, read again on CONFIG SET).
pub const PROTECTED_CONFIGS: [&str; 5] = [
    "dir",
    "tls-cert-file",
    "tls-key-file",
    "tls-ca-cert-file",
    "tls-ca-cert-dir",
];

/// Redis 7's CONFIG SET refusal of a protected parameter.
pub fn protected_config_refused(name: &str) -> String {
    format!("ERR CONFIG SET failed (possibly related to argument '{name}') - can't set protected config")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::acl::Gate;

    #[test]
    fn local_clients_and_gates() {
        for l in [
            "127.0.0.1:5000",
            "[::1]:5000",
            "[::ffff:127.0.0.1]:1",
            "/tmp/d.sock:0",
        ] {
            assert!(is_local(l), "{l}");
        }
        for r in ["127.0.0.2:5000", "10.1.2.3:7711", "[2001:db8::1]:7711"] {
            assert!(!is_local(r), "{r}");
        }
        assert!(Gate::Yes.allows(false));
        assert!(Gate::Local.allows(true) && !Gate::Local.allows(false));
        assert!(!Gate::No.allows(true));
        assert_eq!(Gate::parse("LOCAL"), Some(Gate::Local));
        assert_eq!(Gate::parse("maybe"), None);
        assert_eq!(Gate::default(), Gate::Local);
    }
}
