//! Replies that show jobs whose body is spilled to disk (SHOW, QPEEK,
//! JSCAN ... REPLY ALL): the reply is built on the owner with a
//! placeholder where each spilled body goes, and the spill thread reads
//! and checks the bodies, fills them in and answers the client, as a
//! blocked command's wake does. The job stays on disk (a look is not a
//! reason to bring it back into RAM), and no disk read happens on the
//! owner. A record that fails its checks answers an error, never another
//! body.

use tokio::sync::oneshot;

use super::{Ctx, Outcome};
use crate::domain::job::JobId;
use crate::engine::spill::Loc;
use crate::errors::WireError;
use crate::protocol::resp::Reply;

/// Where a spilled body goes in a reply: indexes into nested arrays, or
/// into a map's pairs (the value of that pair).
pub struct Hole {
    pub path: Vec<usize>,
    pub id: JobId,
    pub loc: Loc,
}

/// The element at `path`.
fn slot<'a>(r: &'a mut Reply, path: &[usize]) -> Option<&'a mut Reply> {
    let Some((&i, rest)) = path.split_first() else {
        return Some(r);
    };
    let next = match r {
        Reply::Array(v) => v.get_mut(i)?,
        Reply::Map(m) => &mut m.get_mut(i)?.1,
        _ => return None,
    };
    slot(next, rest)
}

/// Reply now if nothing is spilled, else once the spill thread has read
/// the bodies.
pub fn reply_with_bodies(ctx: &mut Ctx, reply: Reply, holes: Vec<Hole>) -> Outcome {
    if holes.is_empty() {
        return reply.into();
    }
    let Some(io) = &ctx.node.spill.io else {
        return super::err(WireError::SpillUnreadable);
    };
    let (tx, rx) = oneshot::channel();
    let wants = holes.iter().map(|h| (h.id, h.loc)).collect();
    io.read_bodies(
        wants,
        Box::new(move |bodies| {
            let mut reply = reply;
            for (hole, body) in holes.iter().zip(bodies) {
                let Ok(body) = body else {
                    let _ = tx.send(Reply::Error(WireError::SpillUnreadable.text().into()));
                    return;
                };
                if let Some(s) = slot(&mut reply, &hole.path) {
                    *s = Reply::Bulk(body);
                }
            }
            let _ = tx.send(reply);
        }),
    );
    Outcome::Blocked(rx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holes_address_arrays_and_map_values() {
        let mut r = Reply::Array(vec![
            Reply::Integer(0),
            Reply::Array(vec![Reply::map(vec![
                ("id", Reply::Integer(1)),
                ("body", Reply::NullBulk),
            ])]),
        ]);
        *slot(&mut r, &[1, 0, 1]).unwrap() = Reply::bulk("x");
        let Reply::Array(v) = &r else { panic!() };
        let Reply::Array(items) = &v[1] else { panic!() };
        let Reply::Map(m) = &items[0] else { panic!() };
        assert_eq!(m[1].1, Reply::bulk("x"));
        assert!(slot(&mut r, &[0, 1]).is_none());
        assert!(slot(&mut r, &[5]).is_none());
    }
}
