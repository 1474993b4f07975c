//! PAUSE (docs/COMMANDS.md#pause): queue input/output pause flags, optionally broadcast.

use bytes::Bytes;

use super::args::Args;
use super::{syntax_error, Ctx, Outcome};
use crate::domain::queue::{Queue, PAUSE_IN, PAUSE_OUT};
use crate::engine::BusOut;
use crate::protocol::resp::Reply;

pub fn pause(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    let mut a = Args::new(args);
    let Some(name) = a.next() else {
        return syntax_error();
    };
    let mut flags = 0u8;
    let mut set = false;
    let mut bcast = false;
    while !a.is_done() {
        if a.eat("in") {
            flags |= PAUSE_IN;
            set = true;
        } else if a.eat("out") {
            flags |= PAUSE_OUT;
            set = true;
        } else if a.eat("all") {
            flags |= PAUSE_IN | PAUSE_OUT;
            set = true;
        } else if a.eat("none") {
            flags = 0;
            set = true;
        } else if a.eat("state") {
        } else if a.eat("bcast") {
            bcast = true;
        } else {
            return syntax_error();
        }
    }
    let engine = &mut ctx.node.engine;
    if set {
        engine.set_pause(name, flags, ctx.now);
    }
    let current = engine.queue(name).map_or(0, |q| q.paused);
    if bcast {
        engine.broadcast(BusOut::Pause {
            queue: Bytes::copy_from_slice(name),
            flags: current,
        });
    }
    Reply::Status(Queue::pause_name(current).to_string()).into()
}
