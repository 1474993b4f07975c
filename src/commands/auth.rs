//! AUTH: Disque's `AUTH <password>` (the default user's password,
//! `requirepass`) and Redis 6's `AUTH <user> <password>` for any ACL user
//! (docs/SECURITY.md). Password checks are `crate::acl`'s (SHA-256 hashes
//! compared in constant time). Failed attempts are logged with the peer
//! address and in ACL LOG; nothing sleeps, so a client guessing passwords
//! slows nobody else down.

use super::args::Args;
use super::{err, syntax_error, Ctx, Outcome};
use crate::acl::DEFAULT_USER;
use crate::errors::WireError;
use crate::protocol::resp::Reply;

/// Log a failed attempt with where it came from.
pub fn log_failure(ctx: &Ctx, form: &str) {
    tracing::warn!(
        client = ctx.client.id,
        addr = %ctx.client.addr,
        form,
        "Failed authentication attempt."
    );
}

/// `<user> <password>`: log in as that user (AUTH, HELLO AUTH).
pub fn login(ctx: &mut Ctx, user: &[u8], pass: &[u8]) -> bool {
    super::acl::login(ctx.node, ctx.client, user, pass, ctx.now)
}

/// `AUTH <password>` (Disque 1.0) or `AUTH <user> <password>` (Redis 6).
pub fn auth(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    let mut a = Args::new(args);
    match a.remaining() {
        1 => {
            // Redis 6: the default user's password. With no password to
            // check (nopass), Disque's and Redis's error.
            let nopass = ctx.node.acl.get(DEFAULT_USER).is_none_or(|d| d.nopass);
            if nopass {
                return err(WireError::AuthNoPassword);
            }
            if login(ctx, DEFAULT_USER.as_bytes(), a.arg()) {
                Reply::ok().into()
            } else {
                // As in Disque, a failed AUTH logs the connection out.
                ctx.client.authenticated = false;
                log_failure(ctx, "AUTH <password>");
                err(WireError::InvalidPassword)
            }
        }
        2 => {
            let user = a.arg();
            if login(ctx, user, a.arg()) {
                Reply::ok().into()
            } else {
                log_failure(ctx, "AUTH <user> <password>");
                err(WireError::WrongPass)
            }
        }
        _ => syntax_error(),
    }
}
