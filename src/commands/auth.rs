//! AUTH and the password check HELLO shares: `requirepass` for Disque's
//! `AUTH <password>` and for Redis 6's `AUTH default <password>` (what
//! ACL-aware clients and `redis-cli --user/--pass` send). There is one
//! user, `default`; other names get Redis's WRONGPASS error. Failed
//! attempts are logged with the peer address; nothing sleeps, so a client
//! guessing passwords slows nobody else down.

use bytes::Bytes;

use super::{err, syntax_error, Ctx, Outcome};
use crate::errors::WireError;
use crate::resp::Reply;

/// The only user name: Redis 6's `default` user, whose password is
/// `requirepass`.
const DEFAULT_USER: &str = "default";

/// Compare in constant time (`subtle`), so the reply time does not tell
/// how much of a guess was right. The length is not secret.
pub fn password_matches(given: &[u8], expected: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    given.len() == expected.len() && bool::from(given.ct_eq(expected))
}

/// Redis 6 semantics of `<user> <password>`: the `default` user with the
/// right password, or with any password when none is configured (Redis's
/// `nopass` default user).
pub fn user_password_ok(ctx: &Ctx, user: &[u8], pass: &[u8]) -> bool {
    // User names are case-sensitive, as in Redis.
    if user != DEFAULT_USER.as_bytes() {
        return false;
    }
    match ctx.node.config.requirepass.as_deref() {
        Some(pw) if !pw.is_empty() => password_matches(pass, pw.as_bytes()),
        _ => true,
    }
}

/// Log a failed attempt with where it came from.
pub fn log_failure(ctx: &Ctx, form: &str) {
    tracing::warn!(
        client = ctx.client.id,
        addr = %ctx.client.addr,
        form,
        "Failed authentication attempt."
    );
}

/// `AUTH <password>` (Disque 1.0) or `AUTH <user> <password>` (Redis 6).
pub fn auth(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    match args.len() {
        2 => {
            let pw = ctx.node.config.requirepass.as_deref().unwrap_or("");
            if pw.is_empty() {
                return err(WireError::AuthNoPassword);
            }
            if password_matches(&args[1], pw.as_bytes()) {
                ctx.client.authenticated = true;
                Reply::ok().into()
            } else {
                // As in Disque, a failed AUTH logs the connection out.
                ctx.client.authenticated = false;
                log_failure(ctx, "AUTH <password>");
                err(WireError::InvalidPassword)
            }
        }
        3 => {
            if user_password_ok(ctx, &args[1], &args[2]) {
                ctx.client.authenticated = true;
                Reply::ok().into()
            } else {
                log_failure(ctx, "AUTH <user> <password>");
                err(WireError::WrongPass)
            }
        }
        _ => syntax_error(),
    }
}

#[cfg(test)]
mod tests {
    use super::password_matches;

    #[test]
    fn password_comparison() {
        assert!(password_matches(b"secret", b"secret"));
        assert!(!password_matches(b"secreT", b"secret"));
        assert!(!password_matches(b"secret1", b"secret"));
        assert!(!password_matches(b"", b"secret"));
    }
}
