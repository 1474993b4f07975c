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

use super::args::Args;
use super::{err, string2ll, Ctx, Outcome};
use crate::engine::schedule::{ScheduleDef, ScheduleView, Spec, DEFAULT_GRACE_MS};
use crate::errors::WireError;
use crate::protocol::resp::Reply;

/// A SCHEDULE request.
enum Request<'a> {
    Add(Box<ScheduleDef>),
    List,
    Show(&'a [u8]),
    Del(&'a [u8]),
    /// PAUSE (`true`) or RESUME.
    Pause(&'a [u8], bool),
}

fn parse<'a>(args: &'a [&'a [u8]]) -> Result<Request<'a>, WireError> {
    let mut a = Args::new(args);
    let sub = a.word();
    if sub.is("add") {
        return add(a).map(|def| Request::Add(Box::new(def)));
    }
    if sub.is("list") {
        if !a.is_done() {
            return Err(WireError::Syntax);
        }
        return Ok(Request::List);
    }
    if !["del", "pause", "resume", "show"].iter().any(|s| sub.is(s)) {
        return Err(WireError::ScheduleUsage);
    }
    let [name] = a.rest() else {
        return Err(WireError::WrongArity("schedule"));
    };
    Ok(if sub.is("show") {
        Request::Show(name)
    } else if sub.is("del") {
        Request::Del(name)
    } else {
        Request::Pause(name, sub.is("pause"))
    })
}

pub fn schedule(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    let request = match parse(args) {
        Ok(r) => r,
        Err(e) => return err(e),
    };
    let engine = &mut ctx.node.engine;
    let now = ctx.now;
    let (name, pause) = match request {
        Request::Add(def) => {
            engine.schedule_put(*def, now);
            return Reply::ok().into();
        }
        Request::List => {
            let names = engine
                .schedule_views(now)
                .into_iter()
                .map(|v| Reply::Bulk(v.def.name))
                .collect();
            return Reply::Array(names).into();
        }
        Request::Show(name) => {
            return match engine
                .schedule_views(now)
                .into_iter()
                .find(|v| v.def.name == name)
            {
                Some(v) => describe(&v).into(),
                None => Reply::NullBulk.into(),
            };
        }
        Request::Del(name) => (name, None),
        Request::Pause(name, paused) => (name, Some(paused)),
    };
    let Some(mut def) = engine.schedule_def(name).cloned() else {
        return match pause {
            None => Reply::Integer(0).into(),
            Some(_) => err(WireError::NoSchedule),
        };
    };
    match pause {
        None => {
            def.deleted = true;
            engine.schedule_put(def, now);
            Reply::Integer(1).into()
        }
        Some(paused) => {
            def.paused = paused;
            engine.schedule_put(def, now);
            Reply::ok().into()
        }
    }
}

/// A non-negative seconds value that fits a u32.
fn seconds(v: &[u8]) -> Option<u32> {
    string2ll(v).and_then(|n| u32::try_from(n).ok())
}

/// `ADD <name> <queue> <body> <options>...`: the checked definition.
fn add(mut a: Args<'_>) -> Result<ScheduleDef, WireError> {
    let (Some(name), Some(queue), Some(body)) = (a.next(), a.next(), a.next()) else {
        return Err(WireError::WrongArity("schedule"));
    };
    if name.is_empty() {
        return Err(WireError::ScheduleNameEmpty);
    }
    let mut every: Option<u64> = None;
    let mut cron: Option<String> = None;
    let mut tz: Option<String> = None;
    let mut def = ScheduleDef {
        name: Bytes::copy_from_slice(name),
        spec: Spec::Every(1000),
        queue: Bytes::copy_from_slice(queue),
        body: Bytes::copy_from_slice(body),
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
    while !a.is_done() {
        if a.eat("paused") {
            def.paused = true;
            continue;
        }
        let o = a.word();
        // Every other option takes a value, checked before the option's name.
        if a.is_done() {
            return Err(WireError::Syntax);
        }
        let value = a.word();
        let v = value.bytes();
        if o.is("every") {
            match seconds(v) {
                Some(s) if s > 0 => every = Some(u64::from(s) * 1000),
                _ => return Err(WireError::ScheduleEvery),
            }
        } else if o.is("cron") {
            match std::str::from_utf8(v) {
                Ok(s) => cron = Some(s.to_string()),
                Err(_) => return Err(WireError::ScheduleCron("not UTF-8".into())),
            }
        } else if o.is("tz") {
            match std::str::from_utf8(v) {
                Ok(s) => tz = Some(s.to_string()),
                Err(_) => return Err(WireError::ScheduleTz(value.text())),
            }
        } else if o.is("replicate") {
            match string2ll(v) {
                Some(n @ 1..=65535) => def.replicate = n as u32,
                _ => return Err(WireError::ReplicateRange),
            }
        } else if o.is("retry") {
            match seconds(v) {
                Some(s) => def.retry = Some(s),
                None => return Err(WireError::RetryRange),
            }
        } else if o.is("ttl") {
            match seconds(v) {
                Some(s) if s > 0 => def.ttl = Some(s),
                _ => return Err(WireError::TtlRange),
            }
        } else if o.is("catchup") {
            match seconds(v) {
                Some(s) => def.catchup = s,
                None => return Err(WireError::ScheduleCatchup),
            }
        } else if o.is("grace") {
            match seconds(v) {
                Some(s) if s > 0 => def.grace = s,
                _ => return Err(WireError::ScheduleGrace),
            }
        } else if o.is("overlap") {
            if value.is("skip") {
                def.skip_overlap = true;
            } else if value.is("allow") {
                def.skip_overlap = false;
            } else {
                return Err(WireError::Syntax);
            }
        } else {
            return Err(WireError::Syntax);
        }
    }
    def.spec = match (every, cron) {
        (Some(ms), None) if tz.is_none() => Spec::Every(ms),
        (None, Some(expr)) => Spec::Cron {
            expr,
            tz: tz.unwrap_or_else(|| "UTC".to_string()),
        },
        (Some(_), None) => return Err(WireError::ScheduleTzNeedsCron),
        _ => return Err(WireError::ScheduleSpec),
    };
    if let Err(e) = def.spec.compile() {
        use crate::engine::schedule::SpecError;
        return Err(match e {
            SpecError::TimeZone(z) => WireError::ScheduleTz(z),
            SpecError::Cron(m) => WireError::ScheduleCron(m),
            SpecError::Interval => WireError::ScheduleEvery,
        });
    }
    if def.retry == Some(0) && def.replicate != 1 {
        return Err(WireError::RetryZeroNeedsReplicateOne);
    }
    Ok(def)
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
