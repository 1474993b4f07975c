//! Security directives (our extensions to Disque 1.0, with Redis 6's names
//! and meanings): `protected-mode` and the `tls-*` family. Parsing, CONFIG
//! GET / SET and CONFIG REWRITE of these live here so the rest of the
//! config module only needs one hook each. Building rustls configurations
//! from these values is the `tls` module's job.

use super::values::{parse_bool, parse_u64, yes_no};
use super::Config;
use super::DirectiveError;

/// `tls-auth-clients`: whether TLS clients must present a certificate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TlsAuthClients {
    /// Required (Redis's default).
    #[default]
    Yes,
    No,
    /// Verified when presented, not required.
    Optional,
}

impl TlsAuthClients {
    pub fn as_str(self) -> &'static str {
        match self {
            TlsAuthClients::Yes => "yes",
            TlsAuthClients::No => "no",
            TlsAuthClients::Optional => "optional",
        }
    }

    fn parse(v: &str) -> Option<TlsAuthClients> {
        if v.eq_ignore_ascii_case("optional") {
            return Some(TlsAuthClients::Optional);
        }
        parse_bool(v).map(|b| if b { Self::Yes } else { Self::No })
    }
}

/// TLS settings. Nothing here is read unless a TLS port is configured or
/// `tls-cluster` is on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsConfig {
    /// `tls-port`: None = no TLS client listener; Some(0) = pick a free port.
    pub port: Option<u16>,
    /// `tls-only yes`: no plain-text client listener (also implied by
    /// Redis's `port 0` + non-zero `tls-port`).
    pub only: bool,
    pub cert_file: String,
    pub key_file: String,
    pub ca_cert_file: String,
    pub ca_cert_dir: String,
    pub auth_clients: TlsAuthClients,
    /// Space-separated `TLSv1.2` / `TLSv1.3`; empty = both.
    pub protocols: String,
    /// Colon-separated IANA cipher suite names; empty = rustls defaults.
    pub ciphersuites: String,
    /// The cluster bus over mutual TLS.
    pub cluster: bool,
}

impl TlsConfig {
    /// Whether this node serves clients over TLS.
    pub fn clients_enabled(&self) -> bool {
        self.port.is_some()
    }

    /// Whether the plain-text client port is disabled. With `port 0` and a
    /// fixed `tls-port` this is Redis's TLS-only setup (here `port 0`
    /// alone means "pick a free port").
    pub fn plain_disabled(&self, port: u16) -> bool {
        self.only || (port == 0 && self.port.is_some_and(|p| p != 0))
    }
}

/// Extension parameters in CONFIG GET order, after Disque's own.
pub(crate) const GET_NAMES: [&str; 11] = [
    "protected-mode",
    "tls-port",
    "tls-only",
    "tls-cert-file",
    "tls-key-file",
    "tls-ca-cert-file",
    "tls-ca-cert-dir",
    "tls-auth-clients",
    "tls-protocols",
    "tls-ciphersuites",
    "tls-cluster",
];

/// Extension parameters CONFIG SET accepts. The `tls-*` ones re-read the
/// certificate files (rotation without restart); listeners and the bus
/// mode are fixed at start.
pub(crate) const SET_NAMES: [&str; 8] = [
    "protected-mode",
    "tls-cert-file",
    "tls-key-file",
    "tls-ca-cert-file",
    "tls-ca-cert-dir",
    "tls-auth-clients",
    "tls-protocols",
    "tls-ciphersuites",
];

/// Whether CONFIG SET of `name` must rebuild the TLS configuration.
pub fn reloads_tls(name: &str) -> bool {
    name.starts_with("tls-")
}

const YES_NO: &str = "argument must be 'yes' or 'no'";

/// Config-file directive; None when `name` is not one of ours.
pub(crate) fn apply_directive(
    cfg: &mut Config,
    name: &str,
    args: &[String],
) -> Option<Result<(), DirectiveError>> {
    if !GET_NAMES.contains(&name) {
        return None;
    }
    // tls-protocols may be given quoted ("TLSv1.2 TLSv1.3") or as words.
    if name == "tls-protocols" && !args.is_empty() {
        return Some(set_value(cfg, name, &args.join(" ")));
    }
    if args.len() != 1 {
        return Some(Err("Bad directive or wrong number of arguments".into()));
    }
    Some(set_value(cfg, name, &args[0]))
}

/// Validate and store one value (file, command line or CONFIG SET).
pub(crate) fn set_value(cfg: &mut Config, name: &str, v: &str) -> Result<(), DirectiveError> {
    let t = &mut cfg.tls;
    match name {
        "protected-mode" => cfg.protected_mode = parse_bool(v).ok_or(YES_NO)?,
        "tls-port" => {
            t.port = Some(
                parse_u64(v)
                    .and_then(|p| u16::try_from(p).ok())
                    .ok_or("Invalid tls-port")?,
            );
        }
        "tls-only" => t.only = parse_bool(v).ok_or(YES_NO)?,
        "tls-cert-file" => t.cert_file = v.to_string(),
        "tls-key-file" => t.key_file = v.to_string(),
        "tls-ca-cert-file" => t.ca_cert_file = v.to_string(),
        "tls-ca-cert-dir" => t.ca_cert_dir = v.to_string(),
        "tls-auth-clients" => {
            t.auth_clients =
                TlsAuthClients::parse(v).ok_or("argument must be 'yes', 'no' or 'optional'")?;
        }
        "tls-protocols" => {
            parse_protocols(v)?;
            t.protocols = v.to_string();
        }
        "tls-ciphersuites" => t.ciphersuites = v.to_string(),
        "tls-cluster" => t.cluster = parse_bool(v).ok_or(YES_NO)?,
        _ => return Err("Bad directive or wrong number of arguments".into()),
    }
    Ok(())
}

/// Protocol versions named in `tls-protocols`: (TLS 1.2, TLS 1.3).
pub fn parse_protocols(v: &str) -> Result<(bool, bool), super::UnsupportedTlsProtocol> {
    if v.trim().is_empty() {
        return Ok((true, true));
    }
    let (mut v12, mut v13) = (false, false);
    for p in v.split_whitespace() {
        if p.eq_ignore_ascii_case("TLSv1.2") {
            v12 = true;
        } else if p.eq_ignore_ascii_case("TLSv1.3") {
            v13 = true;
        } else {
            return Err(super::UnsupportedTlsProtocol(p.to_string()));
        }
    }
    Ok((v12, v13))
}

/// CONFIG GET value of one of our parameters.
pub(crate) fn get_value(c: &Config, name: &str) -> String {
    let t = &c.tls;
    match name {
        "protected-mode" => yes_no(c.protected_mode).to_string(),
        "tls-port" => t.port.unwrap_or(0).to_string(),
        "tls-only" => yes_no(t.only).to_string(),
        "tls-cert-file" => t.cert_file.clone(),
        "tls-key-file" => t.key_file.clone(),
        "tls-ca-cert-file" => t.ca_cert_file.clone(),
        "tls-ca-cert-dir" => t.ca_cert_dir.clone(),
        "tls-auth-clients" => t.auth_clients.as_str().to_string(),
        "tls-protocols" => t.protocols.clone(),
        "tls-ciphersuites" => t.ciphersuites.clone(),
        "tls-cluster" => yes_no(t.cluster).to_string(),
        _ => String::new(),
    }
}

/// (option, line, differs from default) for CONFIG REWRITE.
pub(crate) fn rewrite_lines(c: &Config) -> Vec<(&'static str, String, bool)> {
    let t = &c.tls;
    let q = super::values::repr;
    let mut out = vec![(
        "protected-mode",
        format!("protected-mode {}", yes_no(c.protected_mode)),
        !c.protected_mode,
    )];
    if let Some(p) = t.port {
        out.push(("tls-port", format!("tls-port {p}"), true));
    }
    out.push(("tls-only", format!("tls-only {}", yes_no(t.only)), t.only));
    for (name, v) in [
        ("tls-cert-file", &t.cert_file),
        ("tls-key-file", &t.key_file),
        ("tls-ca-cert-file", &t.ca_cert_file),
        ("tls-ca-cert-dir", &t.ca_cert_dir),
        ("tls-protocols", &t.protocols),
        ("tls-ciphersuites", &t.ciphersuites),
    ] {
        out.push((name, format!("{name} {}", q(v)), !v.is_empty()));
    }
    out.push((
        "tls-auth-clients",
        format!("tls-auth-clients {}", t.auth_clients.as_str()),
        t.auth_clients != TlsAuthClients::Yes,
    ));
    out.push((
        "tls-cluster",
        format!("tls-cluster {}", yes_no(t.cluster)),
        t.cluster,
    ));
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn directives_get_set_and_rewrite_round_trip() {
        let _g = super::super::tests::cwd_guard();
        let text = "protected-mode no\ntls-port 0\ntls-only yes\n\
                    tls-cert-file /n.crt\ntls-key-file /n.key\ntls-ca-cert-file /ca.crt\n\
                    tls-ca-cert-dir /cas\ntls-auth-clients optional\n\
                    tls-protocols \"TLSv1.3\"\ntls-ciphersuites TLS_AES_256_GCM_SHA384\n\
                    tls-cluster yes\n";
        let c = super::super::parse_str(text, Config::default()).unwrap();
        assert!(!c.protected_mode);
        assert_eq!(c.tls.port, Some(0));
        assert!(c.tls.only && c.tls.cluster);
        assert_eq!(c.tls.auth_clients, TlsAuthClients::Optional);
        assert_eq!(parse_protocols(&c.tls.protocols), Ok((false, true)));
        assert_eq!(get_value(&c, "tls-auth-clients"), "optional");
        let again = super::super::parse_str(&c.rewrite_content(""), Config::default()).unwrap();
        assert_eq!(again.tls, c.tls);
        assert_eq!(again.protected_mode, c.protected_mode);
        // Defaults write nothing.
        let d = Config::default();
        let out = d.rewrite_content("");
        assert!(
            !out.contains("tls-") && !out.contains("protected-mode"),
            "{out}"
        );
        // Bad values are refused with a reason.
        for bad in [
            "tls-protocols TLSv1.1",
            "tls-auth-clients maybe",
            "tls-port 70000",
        ] {
            assert!(
                super::super::parse_str(bad, Config::default()).is_err(),
                "{bad}"
            );
        }
        let mut c = Config::default();
        assert!(c.set("tls-cluster", b"yes").is_err(), "fixed at start");
        assert_eq!(c.set("TLS-Auth-Clients", b"no"), Ok("tls-auth-clients"));
        assert_eq!(c.tls.auth_clients, TlsAuthClients::No);
    }
}
