//! The dashboard's page, assets and JSON API. Reads and actions go
//! through the command table (`commands::dispatch`) as a RESP3 client
//! would, so the dashboard shows and does exactly what SHOW, JSCAN,
//! PAUSE and DELJOB do (including monitors, slow log and commandstats),
//! and new commands such as REDRIVE light up without engine coupling.

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use bytes::Bytes;
use serde_json::{json, Map, Value};
use tokio::sync::oneshot;

use super::AppState;
use crate::commands::{self, Outcome};
use crate::node::{ClientState, Node, ReplyMode};
use crate::protocol::bus::message::NodeTotals;
use crate::protocol::resp::Reply;

/// How long a request waits for a read from the spill tier, and how many
/// times it runs again (each run may need other jobs read back).
const PAGE_IN_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
const PAGE_IN_TRIES: usize = 4;

/// Client id used for dashboard commands (never handed to a connection;
/// none of the commands it runs can block).
const HTTP_CLIENT_ID: u64 = u64::MAX - 1;
/// Most queues listed by /api/queues (the longest first).
const MAX_LISTED_QUEUES: usize = 1000;
/// Most jobs per JSCAN page.
const MAX_PAGE: u64 = 500;

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");

pub(super) async fn index() -> Response {
    asset_response("text/html; charset=utf-8", INDEX_HTML)
}

pub(super) async fn asset(Path(file): Path<String>) -> Response {
    match file.as_str() {
        "app.js" => asset_response("text/javascript; charset=utf-8", APP_JS),
        "app.css" => asset_response("text/css; charset=utf-8", APP_CSS),
        _ => (StatusCode::NOT_FOUND, "no such asset\n").into_response(),
    }
}

fn asset_response(ctype: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(ctype)),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(
                    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'",
                ),
            ),
        ],
        body,
    )
        .into_response()
}

/// A command's arguments, owned so they can travel to the node's owner.
fn owned(args: &[&[u8]]) -> Vec<Bytes> {
    args.iter().map(|a| Bytes::copy_from_slice(a)).collect()
}

/// The request's user (`super::HTTP_USER`), read in the handler's task:
/// its commands run on the owner thread, where the task-local is not set.
fn http_user() -> Option<String> {
    super::HTTP_USER.try_with(Clone::clone).ok()
}

/// Run one command as the dashboard client, with the permissions of the
/// request's user (`http_user`).
fn run(node: &mut Node, args: Vec<Bytes>, user: Option<String>, now: u64) -> Reply {
    // A wait for memory that began at time 0 is over: this path cannot
    // wait, so a deny-oom command is refused at once rather than parked.
    attempt(node, args, user, false, Some(0), now)
        .unwrap_or_else(|_| Reply::Error("ERR the job is on disk, try again".into()))
}

/// A command that must run again: it waits for whole jobs on disk to come
/// back, or for the spill tier to bring memory down (`Outcome::PageIn`).
struct Again {
    rx: oneshot::Receiver<()>,
    /// It waits for memory (bounded in time by the dispatcher), not for
    /// jobs on disk.
    memory: bool,
    /// `ClientState::oom_wait_since` as the run left it.
    oom_wait_since: Option<u64>,
}

/// One run of a command; Err when it must run again once `rx` fires.
fn attempt(
    node: &mut Node,
    args: Vec<Bytes>,
    user: Option<String>,
    paged_in: bool,
    oom_wait_since: Option<u64>,
    now: u64,
) -> Result<Reply, Again> {
    let mut client = ClientState {
        id: HTTP_CLIENT_ID,
        addr: "http:0".to_string(),
        proto: 3,
        authenticated: true,
        reply_mode: ReplyMode::On,
        last_cmd: "NULL",
        acl: Default::default(),
        paged_in,
        oom_wait_since,
    };
    if let Some(user) = user {
        client.acl.login(&user);
    }
    let memory_waits = node.spill.memory_waited;
    let argv: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
    match commands::dispatch(node, &mut client, &argv, now) {
        Outcome::Reply(r) | Outcome::Close(Some(r)) => Ok(r),
        Outcome::PageIn(rx) => Err(Again {
            rx,
            memory: node.spill.memory_waited != memory_waits,
            oom_wait_since: client.oom_wait_since,
        }),
        _ => Ok(Reply::Error(
            "ERR this command is not available over HTTP".into(),
        )),
    }
}

/// Run one command for a request the way a connection does: while it
/// waits for jobs on disk, wait for them (bounded) and run it again; a
/// wait for memory is bounded by the dispatcher itself.
async fn command(st: &AppState, args: Vec<Bytes>, user: Option<String>) -> Reply {
    let mut paged_in = false;
    let mut oom_wait_since = None;
    let mut tries = 0;
    while tries < PAGE_IN_TRIES {
        let (a, u) = (args.clone(), user.clone());
        let ran = st
            .shared
            .call(move |node, now| attempt(node, a, u, paged_in, oom_wait_since, now))
            .await;
        match ran {
            Ok(r) => return r,
            Err(again) => {
                let _ = tokio::time::timeout(PAGE_IN_WAIT, again.rx).await;
                oom_wait_since = again.oom_wait_since;
                if !again.memory {
                    paged_in = true;
                    tries += 1;
                }
            }
        }
    }
    Reply::Error("ERR the job is on disk and could not be read back".into())
}

fn to_json(r: Reply) -> Value {
    match r {
        Reply::Status(s) => Value::String(s),
        Reply::Id(id) => Value::String(String::from_utf8_lossy(&id).into_owned()),
        Reply::Error(e) => json!({ "error": e }),
        Reply::Integer(i) => Value::from(i),
        Reply::Bulk(b) | Reply::Raw(b) => Value::String(String::from_utf8_lossy(&b).into_owned()),
        Reply::NullBulk | Reply::NullArray => Value::Null,
        Reply::Array(v) => Value::Array(v.into_iter().map(to_json).collect()),
        Reply::Map(pairs) => {
            let mut m = Map::new();
            for (k, v) in pairs {
                let key = match to_json(k) {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                m.insert(key, to_json(v));
            }
            Value::Object(m)
        }
    }
}

/// A command's reply as an HTTP response (errors become 400).
fn reply_response(r: Reply) -> Response {
    match r {
        Reply::Error(e) => (StatusCode::BAD_REQUEST, Json(json!({ "error": e }))).into_response(),
        other => Json(json!({ "result": to_json(other) })).into_response(),
    }
}

pub(super) async fn overview(State(st): State<AppState>) -> Json<Value> {
    let v = st
        .shared
        .call(move |node, now| {
            let c = node.engine.counters();
            let queues = node.engine.queue_stats(now);
            let queued: u64 = queues.iter().map(|q| q.len).sum();
            let blocked: u64 = queues.iter().map(|q| q.blocked).sum();
            let peers: Vec<Value> = node
                .engine
                .peer_stats()
                .into_iter()
                .map(|p| {
                    json!({
                        "id": p.id, "addr": p.addr, "flags": p.flags,
                        "myself": p.myself, "link": p.link, "reachable": p.reachable,
                    })
                })
                .collect();
            json!({
                "node": {
                    "id": String::from_utf8_lossy(&node.engine.cluster().my_id()),
                    "version": crate::VERSION,
                    "port": node.tcp_port,
                    "uptime_s": now.saturating_sub(node.start_time) / 1000,
                    "ready": node.readiness().err(),
                },
                "counters": {
                    "added": c.added, "delivered": c.delivered, "acked": c.acked,
                    "nacked": c.nacked, "requeued": c.requeued, "expired": c.expired,
                    "evicted": c.evicted, "dead_lettered": c.dead_lettered,
                    "imported": c.imported, "norepl": c.norepl,
                    "oom": node.command_stats.oom_refused,
                },
                "totals": {
                    "queues": queues.len(), "queued": queued, "blocked": blocked,
                    "jobs": node.engine.registered_jobs(), "clients": node.clients.len(),
                },
                "memory": {
                    "used": crate::os::allocator::allocated(),
                    "max": node.engine.maxmemory(),
                    "level": node.engine.memory_level(),
                },
                "aof": {
                    "state": node.aof.state.name(),
                    "size": node.aof.current_size,
                    "rewriting": node.aof.rewrite_in_progress,
                    "error": node.aof_write_error(),
                },
                "spill": node.config.spill.then(|| {
                    let sp = node.engine.spill_stats();
                    json!({
                        "jobs": sp.jobs, "disk_bytes": sp.disk_bytes,
                        "live_bytes": sp.live_bytes, "active": sp.active,
                        "paused": sp.fault.map(|f| f.name())
                            .or(sp.disk_budget_full.then_some("disk-budget")),
                    })
                }),
                "cluster": peers,
                "features": { "redrive": commands::lookup(node, b"redrive").is_some() },
                "now": now,
            })
        })
        .await;
    Json(v)
}

/// Longest /api/cluster waits for the peers' totals: the engine answers
/// by itself after at most `MAX_WAIT_MS`; this only guards against a
/// request that is never answered.
const CLUSTER_WAIT: std::time::Duration =
    std::time::Duration::from_millis(crate::engine::qlen_cluster::MAX_WAIT_MS + 1000);

fn totals_json(t: &NodeTotals) -> Value {
    json!({ "queued": t.queued, "jobs": t.jobs, "queues": t.queues, "blocked": t.blocked })
}

/// Every known node with its link state and queue totals. Peers are
/// asked over the bus (QLENREQ with the TOTALS flag, as QLEN CLUSTER
/// does), only while someone requests this; a peer that is not linked,
/// not reachable, does not answer within the QLEN CLUSTER wait or
/// predates totals has `"totals": null` (unknown, not zero).
pub(super) async fn cluster(State(st): State<AppState>) -> Json<Value> {
    let (mut nodes, idx, rx, now) = st
        .shared
        .call(move |node, now| {
            let mine = node.engine.node_totals();
            let mut idx = Vec::new();
            let nodes: Vec<Value> = node
                .engine
                .peer_stats()
                .into_iter()
                .map(|p| {
                    idx.push((p.idx, p.myself));
                    json!({
                        "id": p.id, "addr": p.addr, "flags": p.flags,
                        "myself": p.myself, "link": p.link, "reachable": p.reachable,
                        "totals": if p.myself { totals_json(&mine) } else { Value::Null },
                    })
                })
                .collect();
            (nodes, idx, node.cluster_totals(now), now)
        })
        .await;
    let answers = match tokio::time::timeout(CLUSTER_WAIT, rx).await {
        Ok(Ok(a)) => a,
        _ => Vec::new(),
    };
    let mut known = 0u64;
    let mut queued = 0u64;
    for (entry, (i, myself)) in nodes.iter_mut().zip(idx) {
        if !myself {
            if let Some((_, Some(t))) = answers.iter().find(|(n, _)| *n == i) {
                entry["totals"] = totals_json(t);
            }
        }
        if let Some(q) = entry["totals"]["queued"].as_u64() {
            known += 1;
            queued += q;
        }
    }
    let unknown = nodes.len() as u64 - known;
    Json(json!({
        "nodes": nodes,
        "queued_known": queued,
        "nodes_unknown": unknown,
        "now": now,
    }))
}

pub(super) async fn queues(State(st): State<AppState>) -> Json<Value> {
    let v = st
        .shared
        .call(move |node, now| {
            let mut qs = node.engine.queue_stats(now);
            let waiting = node.engine.waiting_per_queue();
            let total = qs.len();
            qs.sort_by(|a, b| b.len.cmp(&a.len).then_with(|| a.name.cmp(&b.name)));
            qs.truncate(MAX_LISTED_QUEUES);
            let list: Vec<Value> = qs
                .into_iter()
                .map(|q| {
                    // QLIMIT, for a queue given one: the setting, this
                    // node's shares and what it used of them.
                    let limit = node.engine.limit_of(&q.name).map(|l| {
                        json!({
                            "rate": l.limit.rate, "interval_ms": l.limit.interval_ms,
                            "inflight": l.limit.inflight, "rate_share": l.rate_share,
                            "inflight_share": l.inflight_share,
                            "window_used": l.window_used, "inflight_used": l.inflight_used,
                        })
                    });
                    json!({
                        "name": String::from_utf8_lossy(&q.name),
                        "len": q.len, "oldest_age_ms": q.oldest_age_ms,
                        "blocked": q.blocked, "jobs_in": q.jobs_in, "jobs_out": q.jobs_out,
                        "paused_in": q.paused_in, "paused_out": q.paused_out,
                        "limit": limit,
                        // ADDJOB ... AFTER jobs held for this queue.
                        "waiting": waiting.get::<[u8]>(&q.name).copied().unwrap_or(0),
                    })
                })
                .collect();
            json!({ "total": total, "queues": list, "now": now })
        })
        .await;
    Json(v)
}

/// The node's sampled history (see `history`): rates, queued, memory.
pub(super) async fn history(State(st): State<AppState>) -> Json<Value> {
    Json(st.history.lock().node_json())
}

/// One queue's sampled history; asking starts tracking it (bounded, see
/// `history`), so a queue page fills in from the next samples.
pub(super) async fn queue_history(
    State(st): State<AppState>,
    Path(name): Path<String>,
) -> Json<Value> {
    let now = crate::support::clock::unix_ms();
    let mut h = st.history.lock();
    h.viewed(name.as_bytes(), now);
    Json(h.queue_json(name.as_bytes()))
}

#[derive(serde::Deserialize)]
pub(super) struct Page {
    cursor: Option<u64>,
    count: Option<u64>,
    state: Option<String>,
}

pub(super) async fn queue_jobs(
    State(st): State<AppState>,
    Path(name): Path<String>,
    Query(p): Query<Page>,
) -> Response {
    let cursor = p.cursor.unwrap_or(0).to_string();
    let count = p.count.unwrap_or(50).clamp(1, MAX_PAGE).to_string();
    let mut args: Vec<&[u8]> = vec![
        b"JSCAN",
        cursor.as_bytes(),
        b"COUNT",
        count.as_bytes(),
        b"QUEUE",
        name.as_bytes(),
        b"REPLY",
        b"all",
    ];
    if let Some(s) = p.state.as_deref().filter(|s| !s.is_empty()) {
        args.push(b"STATE");
        args.push(s.as_bytes());
    }
    let args = owned(&args);
    let user = http_user();
    reply_response(command(&st, args, user).await)
}

pub(super) async fn show(State(st): State<AppState>, Path(id): Path<String>) -> Response {
    let user = http_user();
    reply_response(command(&st, owned(&[b"SHOW", id.as_bytes()]), user).await)
}

#[derive(serde::Deserialize)]
pub(super) struct PauseBody {
    /// in, out, all or none.
    mode: String,
    /// Also tell the other nodes (PAUSE ... BCAST); default true.
    bcast: Option<bool>,
}

pub(super) async fn pause(
    State(st): State<AppState>,
    Path(name): Path<String>,
    Json(body): Json<PauseBody>,
) -> Response {
    if !matches!(body.mode.as_str(), "in" | "out" | "all" | "none") {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({ "error": "mode must be in, out, all or none" })),
        )
            .into_response();
    }
    let mut args: Vec<&[u8]> = vec![b"PAUSE", name.as_bytes(), body.mode.as_bytes()];
    if body.bcast.unwrap_or(true) {
        args.push(b"BCAST");
    }
    let args = owned(&args);
    let user = http_user();
    reply_response(command(&st, args, user).await)
}

pub(super) async fn delete_job(State(st): State<AppState>, Path(id): Path<String>) -> Response {
    let user = http_user();
    reply_response(command(&st, owned(&[b"DELJOB", id.as_bytes()]), user).await)
}

pub(super) async fn redrive(State(st): State<AppState>, Path(name): Path<String>) -> Response {
    let user = http_user();
    reply_response(
        st.shared
            .call(move |node, now| {
                if commands::lookup(node, b"redrive").is_none() {
                    return Reply::Error("ERR REDRIVE is not available on this node".into());
                }
                run(
                    node,
                    owned(&[b"REDRIVE", b"FROM", name.as_bytes()]),
                    user,
                    now,
                )
            })
            .await,
    )
}

/// Every schedule as SCHEDULE SHOW describes it (through the command, so
/// ACLs apply), and the node's clock for the "next tick in" column.
pub(super) async fn schedules(State(st): State<AppState>) -> Json<Value> {
    let user = http_user();
    let v = st
        .shared
        .call(move |node, now| {
            let names = match run(node, owned(&[b"SCHEDULE", b"LIST"]), user.clone(), now) {
                Reply::Array(names) => names,
                Reply::Error(e) => return json!({ "error": e }),
                _ => Vec::new(),
            };
            let list: Vec<Value> = names
                .into_iter()
                .filter_map(|n| match n {
                    Reply::Bulk(name) => {
                        let args = vec![
                            Bytes::from_static(b"SCHEDULE"),
                            Bytes::from_static(b"SHOW"),
                            name,
                        ];
                        Some(to_json(run(node, args, user.clone(), now)))
                    }
                    _ => None,
                })
                .filter(|v| v.is_object() && v.get("error").is_none())
                .collect();
            json!({ "now": now, "schedules": list })
        })
        .await;
    Json(v)
}

/// SCHEDULE PAUSE / RESUME / DEL from the dashboard.
pub(super) async fn schedule_action(
    State(st): State<AppState>,
    Path((name, action)): Path<(String, String)>,
) -> Response {
    let verb: &[u8] = match action.as_str() {
        "pause" => b"PAUSE",
        "resume" => b"RESUME",
        "delete" => b"DEL",
        _ => {
            return (
                StatusCode::NOT_FOUND,
                Json(json!({ "error": "action must be pause, resume or delete" })),
            )
                .into_response()
        }
    };
    let args = owned(&[b"SCHEDULE", verb, name.as_bytes()]);
    let user = http_user();
    reply_response(command(&st, args, user).await)
}

/// Every batch as BATCH STATUS describes it (through the command, so
/// ACLs apply), with its callbacks' queues.
pub(super) async fn batches(State(st): State<AppState>) -> Json<Value> {
    let user = http_user();
    let v = st
        .shared
        .call(move |node, now| {
            let ids = match run(node, owned(&[b"BATCH", b"LIST"]), user.clone(), now) {
                Reply::Array(ids) => ids,
                Reply::Error(e) => return json!({ "error": e }),
                _ => Vec::new(),
            };
            let list: Vec<Value> = ids
                .into_iter()
                .filter_map(|n| match n {
                    Reply::Bulk(id) => {
                        let args = vec![
                            Bytes::from_static(b"BATCH"),
                            Bytes::from_static(b"STATUS"),
                            id.clone(),
                        ];
                        let mut v = to_json(run(node, args, user.clone(), now));
                        let cb = |c: &Option<crate::engine::batch::Callback>| {
                            c.as_ref()
                                .map(|c| Value::String(String::from_utf8_lossy(&c.queue).into()))
                                .unwrap_or(Value::Null)
                        };
                        if let (Some(o), Some(b)) = (v.as_object_mut(), node.engine.batch_get(&id))
                        {
                            o.insert("on-success".into(), cb(&b.on_success));
                            o.insert("on-complete".into(), cb(&b.on_complete));
                        }
                        Some(v)
                    }
                    _ => None,
                })
                .filter(|v| v.is_object() && v.get("error").is_none())
                .collect();
            json!({ "now": now, "batches": list })
        })
        .await;
    Json(v)
}

/// BATCH CANCEL from the dashboard.
pub(super) async fn batch_action(
    State(st): State<AppState>,
    Path((id, action)): Path<(String, String)>,
) -> Response {
    if action != "cancel" {
        return (
            StatusCode::NOT_FOUND,
            Json(json!({ "error": "action must be cancel" })),
        )
            .into_response();
    }
    let args = owned(&[b"BATCH", b"CANCEL", id.as_bytes()]);
    let user = http_user();
    reply_response(command(&st, args, user).await)
}
