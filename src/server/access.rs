//! Who may talk to the client port before any command runs: Redis's
//! protected mode (our extension to Disque 1.0, default on). With no
//! `requirepass` and no explicit `bind`, only loopback clients are served;
//! others get Redis's explanatory DENIED error (`WireError::ProtectedMode`) and are disconnected. Unix
//! socket clients are always local.

use std::net::{IpAddr, SocketAddr};

use crate::config::Config;

/// Whether protected mode refuses a TCP client from `peer`.
pub fn protected_mode_denies(config: &Config, peer: &SocketAddr) -> bool {
    let active = config.protected_mode
        && config.bind.is_empty()
        && config.requirepass.as_deref().is_none_or(str::is_empty);
    active && !is_loopback(peer.ip())
}

fn is_loopback(ip: IpAddr) -> bool {
    // An IPv4 client on a dual-stack socket shows up as ::ffff:127.0.0.1.
    ip.to_canonical().is_loopback()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_without_password_or_bind() {
        let mut c = Config::default();
        let lan: SocketAddr = "10.1.2.3:5000".parse().unwrap_or_else(|_| unreachable!());
        let lo4: SocketAddr = "127.0.0.1:5000".parse().unwrap_or_else(|_| unreachable!());
        let lo6: SocketAddr = "[::1]:5000".parse().unwrap_or_else(|_| unreachable!());
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:5000"
            .parse()
            .unwrap_or_else(|_| unreachable!());
        assert!(protected_mode_denies(&c, &lan));
        for ok in [lo4, lo6, mapped] {
            assert!(!protected_mode_denies(&c, &ok));
        }
        c.requirepass = Some("pw".into());
        assert!(!protected_mode_denies(&c, &lan), "a password lifts it");
        c.requirepass = None;
        c.bind = vec!["0.0.0.0".into()];
        assert!(
            !protected_mode_denies(&c, &lan),
            "an explicit bind lifts it"
        );
        c.bind.clear();
        c.protected_mode = false;
        assert!(!protected_mode_denies(&c, &lan));
    }
}
