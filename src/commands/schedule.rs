//! SCHEDULE (our extension, docs/COMMANDS.md#schedule): recurring jobs
//! without a leader. This module parses the subcommands and encodes their
//! replies; the table, its replication and the firing of ticks are
//! `engine::schedule`.
//!
//! * `SCHEDULE ADD <name> <queue> <body> (EVERY <sec> | CRON <expr> [TZ <zone>])
//!   [REPLICATE <n>] [RETRY <sec>] [TTL <sec>] [CATCHUP <sec>]
//!   [OVERLAP allow|skip] [GRACE <ms>] [PAUSED]`: add or replace; `+OK`.
//! * `SCHEDULE DEL <name>`: `:1` if it existed, else `:0`.
//! * `SCHEDULE PAUSE|RESUME <name>`: `+OK`, or `-NOSCHEDULE`.
//! * `SCHEDULE SHOW <name>`: a map of the definition and this node's tick
//!   counters, or a null bulk.
//! * `SCHEDULE LIST`: the names, sorted.

use bytes::Bytes;

use super::{eq_ic, err, string2ll, syntax_error, Ctx, Outcome};
use crate::engine::schedule::{ScheduleDef, ScheduleView, Spec, DEFAULT_GRACE_MS};
use crate::errors::WireError;
use crate::protocol::resp::Reply;

pub fn schedule(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let sub = &args[1];
    let rest = &args[2..];
    if eq_ic(sub, "add") {
        return add(ctx, rest);
    }
    if eq_ic(sub, "list") {
        if !rest.is_empty() {
            return syntax_error();
        }
        let names = ctx
            .node
            .engine
            .schedule_views(ctx.now)
            .into_iter()
            .map(|v| Reply::Bulk(v.def.name))
            .collect();
        return Reply::Array(names).into();
    }
    let [name] = rest else {
        return if ["del", "pause", "resume", "show"]
            .iter()
            .any(|s| eq_ic(sub, s))
        {
            err(WireError::WrongArity("schedule"))
        } else {
            err(WireError::ScheduleUsage)
        };
    };
    let engine = &mut ctx.node.engine;
    let now = ctx.now;
    if eq_ic(sub, "show") {
        return match engine
            .schedule_views(now)
            .into_iter()
            .find(|v| v.def.name == name)
        {
            Some(v) => describe(&v).into(),
            None => Reply::NullBulk.into(),
        };
    }
    let Some(mut def) = engine.schedule_def(name).cloned() else {
        return if eq_ic(sub, "del") {
            Reply::Integer(0).into()
        } else if eq_ic(sub, "pause") || eq_ic(sub, "resume") {
            err(WireError::NoSchedule)
        } else {
            err(WireError::ScheduleUsage)
        };
    };
    if eq_ic(sub, "del") {
        def.deleted = true;
        engine.schedule_put(def, now);
        return Reply::Integer(1).into();
    }
    if eq_ic(sub, "pause") || eq_ic(sub, "resume") {
        def.paused = eq_ic(sub, "pause");
        engine.schedule_put(def, now);
        return Reply::ok().into();
    }
    err(WireError::ScheduleUsage)
}

/// A non-negative seconds value that fits a u32.
fn seconds(v: &[u8]) -> Option<u32> {
    string2ll(v).and_then(|n| u32::try_from(n).ok())
}

fn add(ctx: &mut Ctx, args: &[Bytes]) -> Outcome {
    let [name, queue, body, opts @ ..] = args else {
        return err(WireError::WrongArity("schedule"));
    };
    if name.is_empty() {
        return err(WireError::ScheduleNameEmpty);
    }
    let mut every: Option<u64> = None;
    let mut cron: Option<String> = None;
    let mut tz: Option<String> = None;
    let mut def = ScheduleDef {
        name: name.clone(),
        spec: Spec::Every(1000),
        queue: queue.clone(),
        body: body.clone(),
        replicate: 0,
        retry: None,
        ttl: None,
        catchup: 0,
        grace: DEFAULT_GRACE_MS,
        skip_overlap: false,
        paused: false,
        deleted: false,
        created: 0,
        version: 0,
        origin: [0; 40],
    };
    let mut i = 0;
    while i < opts.len() {
        let o = &opts[i];
        if eq_ic(o, "paused") {
            def.paused = true;
            i += 1;
            continue;
        }
        let Some(v) = opts.get(i + 1) else {
            return syntax_error();
        };
        i += 2;
        if eq_ic(o, "every") {
            match seconds(v) {
                Some(s) if s > 0 => every = Some(u64::from(s) * 1000),
                _ => return err(WireError::ScheduleEvery),
            }
        } else if eq_ic(o, "cron") {
            match std::str::from_utf8(v) {
                Ok(s) => cron = Some(s.to_string()),
                Err(_) => return err(WireError::ScheduleCron("not UTF-8".into())),
            }
        } else if eq_ic(o, "tz") {
            match std::str::from_utf8(v) {
                Ok(s) => tz = Some(s.to_string()),
                Err(_) => return err(WireError::ScheduleTz(String::from_utf8_lossy(v).into())),
            }
        } else if eq_ic(o, "replicate") {
            match string2ll(v) {
                Some(n @ 1..=65535) => def.replicate = n as u32,
                _ => return err(WireError::ReplicateRange),
            }
        } else if eq_ic(o, "retry") {
            match seconds(v) {
                Some(s) => def.retry = Some(s),
                None => return err(WireError::RetryRange),
            }
        } else if eq_ic(o, "ttl") {
            match seconds(v) {
                Some(s) if s > 0 => def.ttl = Some(s),
                _ => return err(WireError::TtlRange),
            }
        } else if eq_ic(o, "catchup") {
            match seconds(v) {
                Some(s) => def.catchup = s,
                None => return err(WireError::ScheduleCatchup),
            }
        } else if eq_ic(o, "grace") {
            match seconds(v) {
                Some(s) if s > 0 => def.grace = s,
                _ => return err(WireError::ScheduleGrace),
            }
        } else if eq_ic(o, "overlap") {
            if eq_ic(v, "skip") {
                def.skip_overlap = true;
            } else if eq_ic(v, "allow") {
                def.skip_overlap = false;
            } else {
                return syntax_error();
            }
        } else {
            return syntax_error();
        }
    }
    def.spec = match (every, cron) {
        (Some(ms), None) if tz.is_none() => Spec::Every(ms),
        (None, Some(expr)) => Spec::Cron {
            expr,
            tz: tz.unwrap_or_else(|| "UTC".to_string()),
        },
        (Some(_), None) => return err(WireError::ScheduleTzNeedsCron),
        _ => return err(WireError::ScheduleSpec),
    };
    if let Err(e) = def.spec.compile() {
        use crate::engine::schedule::SpecError;
        return err(match e {
            SpecError::TimeZone(z) => WireError::ScheduleTz(z),
            SpecError::Cron(m) => WireError::ScheduleCron(m),
            SpecError::Interval => WireError::ScheduleEvery,
        });
    }
    if def.retry == Some(0) && def.replicate != 1 {
        return err(WireError::RetryZeroNeedsReplicateOne);
    }
    ctx.node.engine.schedule_put(def, ctx.now);
    Reply::ok().into()
}

fn int(v: u64) -> Reply {
    Reply::Integer(i64::try_from(v).unwrap_or(i64::MAX))
}

fn opt_int(v: Option<u32>) -> Reply {
    v.map_or(Reply::NullBulk, |v| Reply::Integer(i64::from(v)))
}

fn text(s: &str) -> Reply {
    Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()))
}

/// The SCHEDULE SHOW map (also the dashboard's row).
pub fn describe(v: &ScheduleView) -> Reply {
    let d = &v.def;
    let (every, cron, tz) = match &d.spec {
        Spec::Every(ms) => (int(ms / 1000), Reply::NullBulk, Reply::NullBulk),
        Spec::Cron { expr, tz } => (Reply::NullBulk, text(expr), text(tz)),
    };
    let fields: Vec<(&str, Reply)> = vec![
        ("name", Reply::Bulk(d.name.clone())),
        ("queue", Reply::Bulk(d.queue.clone())),
        ("body", Reply::Bulk(d.body.clone())),
        ("every", every),
        ("cron", cron),
        ("tz", tz),
        (
            "replicate",
            if d.replicate == 0 {
                text("majority")
            } else {
                int(u64::from(d.replicate))
            },
        ),
        ("retry", opt_int(d.retry)),
        ("ttl", opt_int(d.ttl)),
        ("catchup", int(u64::from(d.catchup))),
        ("grace", int(u64::from(d.grace))),
        (
            "overlap",
            text(if d.skip_overlap { "skip" } else { "allow" }),
        ),
        ("paused", int(u64::from(d.paused))),
        ("created", int(d.created)),
        ("version", int(d.version)),
        ("next-tick", v.next_tick.map_or(Reply::NullBulk, int)),
        ("last-tick", int(v.last_tick)),
        (
            "last-job",
            v.last_job.map_or(Reply::NullBulk, |id| Reply::bulk(id.0)),
        ),
        ("pending-ticks", int(v.pending as u64)),
        ("ticks-fired", int(v.stats.fired)),
        ("ticks-deduplicated", int(v.stats.deduplicated)),
        ("ticks-skipped", int(v.stats.skipped)),
        ("ticks-expired", int(v.stats.expired)),
    ];
    Reply::Map(fields.into_iter().map(|(k, v)| (text(k), v)).collect())
}
