//! The HTTP endpoint beside the RESP port (`http-port`, 0 = off): the
//! Prometheus exposition at `/metrics`, `/healthz` and `/readyz` for
//! probes, and the dashboard at `/` with its JSON API under `/api`.
//!
//! It runs on the node's tokio runtime with its own accept loop (hyper's
//! HTTP/1 connection driver around an axum `Router`), so the stream type
//! is ours to choose: a TLS stream can be handed to `serve_connection`
//! unchanged. Handlers reach the node through `Shared::call` (one owner
//! task per request), and their commands run through `commands::dispatch`
//! as client commands do.
//!
//! With TLS configured (`tls-port` and the `tls-*` files), the endpoint
//! serves HTTPS only, with the client port's certificate and client
//! certificate policy (`tls-auth-clients`).
//!
//! Access (docs/SECURITY.md#http): the ACL users, with HTTP basic auth.
//! When the default user needs a password (`requirepass`) or is off,
//! everything except the probes needs credentials; a request that sends
//! some is served as that user even when none are needed. Each route
//! needs the permission of the command it amounts to (the dashboard and
//! /metrics: INFO; a queue's jobs: JSCAN on that queue; pause: PAUSE on
//! it; delete: DELJOB on the job's queue...), so a user with
//! `+@introspection` sees everything and changes nothing. POST actions
//! also need the `X-Disque-Action` header, which a cross-site form cannot
//! send and a cross-site `fetch` cannot send without a CORS preflight we
//! never grant (CSRF).

mod api;
pub mod exporter;
mod health;
mod history;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use std::collections::HashMap;

use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use base64::Engine as _;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;

use super::Shared;
use exporter::{Exporter, Snapshot};

/// Header every state-changing request must carry (see the module doc).
pub const ACTION_HEADER: &str = "x-disque-action";
/// Longest a client may take to send a request's headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest one connection is kept (dashboards poll; they reconnect).
const CONNECTION_LIFETIME: Duration = Duration::from_secs(600);

#[derive(Clone)]
pub(crate) struct AppState {
    pub shared: Arc<Shared>,
    pub exporter: Arc<Exporter>,
    /// Set once startup (AOF load included) is over.
    pub started: Arc<AtomicBool>,
    /// The sampled history behind the dashboard's charts.
    pub history: history::Shelf,
}

/// A running endpoint.
pub struct Endpoint {
    pub port: u16,
    started: Arc<AtomicBool>,
}

impl Endpoint {
    /// Startup is over: /readyz may answer ready from now on.
    pub fn started(&self) {
        self.started.store(true, Ordering::Relaxed);
    }
}

/// Bind the HTTP listeners and start serving (None when the endpoint is
/// off, the default). /readyz answers 503 until `Endpoint::started`.
pub async fn start(shared: &Arc<Shared>) -> Result<Option<Endpoint>, super::listener::BindError> {
    let (port, bind) = shared
        .call(|n, _| {
            let bind = if n.config.http_bind.is_empty() {
                n.config.bind.clone()
            } else {
                n.config.http_bind.clone()
            };
            (n.config.http_port, bind)
        })
        .await;
    let Some(port) = port else {
        return Ok(None);
    };
    let listeners = bind_listeners(&bind, port)
        .map_err(|source| super::listener::BindError::Http { port, source })?;
    let bound = listeners
        .first()
        .and_then(|l| l.local_addr().ok())
        .map_or(port, |a| a.port());
    let weak = Arc::downgrade(shared);
    let exporter = Exporter::new(move || {
        weak.upgrade()
            .map(|s| s.call_blocking(|node, now| Snapshot::take(node, now)))
    });
    let started = Arc::new(AtomicBool::new(false));
    let state = AppState {
        shared: shared.clone(),
        exporter: Arc::new(exporter),
        started: started.clone(),
        history: history::Shelf::default(),
    };
    tokio::spawn(history::sampler(shared.clone(), state.history.clone()));
    let app = router(state);
    for l in listeners {
        let l =
            TcpListener::from_std(l).map_err(|source| super::listener::BindError::Register {
                port: bound,
                source,
            })?;
        tokio::spawn(accept_loop(shared.clone(), l, app.clone()));
    }
    tracing::info!(
        port = bound,
        "HTTP endpoint listening (metrics, health, dashboard)."
    );
    Ok(Some(Endpoint {
        port: bound,
        started,
    }))
}

/// With port 0 the first address picks the port and the others follow it.
fn bind_listeners(bind: &[String], port: u16) -> std::io::Result<Vec<std::net::TcpListener>> {
    if port != 0 || bind.len() <= 1 {
        return bind_all_nonblocking(bind, port);
    }
    let mut first = bind_all_nonblocking(&bind[..1], 0)?;
    let actual = first[0].local_addr()?.port();
    first.extend(bind_all_nonblocking(&bind[1..], actual)?);
    Ok(first)
}

fn bind_all_nonblocking(bind: &[String], port: u16) -> std::io::Result<Vec<std::net::TcpListener>> {
    let ls = super::listener::bind_all(bind, port, 128)?;
    for l in &ls {
        l.set_nonblocking(true)?;
    }
    Ok(ls)
}

fn router(state: AppState) -> Router {
    let guarded = Router::new()
        .route("/", get(api::index))
        .route("/assets/{file}", get(api::asset))
        .route("/metrics", get(metrics))
        .route("/api/overview", get(api::overview))
        .route("/api/cluster", get(api::cluster))
        .route("/api/queues", get(api::queues))
        .route("/api/history", get(api::history))
        .route("/api/queues/{name}/jobs", get(api::queue_jobs))
        .route("/api/queues/{name}/history", get(api::queue_history))
        .route("/api/queues/{name}/pause", post(api::pause))
        .route("/api/queues/{name}/redrive", post(api::redrive))
        .route("/api/jobs/{id}", get(api::show))
        .route("/api/jobs/{id}/delete", post(api::delete_job))
        .route("/api/schedules", get(api::schedules))
        .route("/api/schedules/{name}/{action}", post(api::schedule_action))
        .route("/api/batches", get(api::batches))
        .route("/api/batches/{id}/{action}", post(api::batch_action))
        // After routing, so the guard knows the route and its parameters.
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), guard));
    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .merge(guarded)
        .with_state(state)
}

async fn metrics(State(st): State<AppState>) -> Response {
    // Rendering waits for an owner task (`call_blocking` for the snapshot)
    // and then encodes: keep it off the runtime's async path, as it is the
    // one handler doing real work.
    let exporter = st.exporter.clone();
    match tokio::task::spawn_blocking(move || exporter.render()).await {
        Ok(Ok(text)) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            )],
            text,
        )
            .into_response(),
        _ => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "metrics encoding failed\n",
        )
            .into_response(),
    }
}

tokio::task_local! {
    /// The user a request is served as, for the commands its handler runs.
    static HTTP_USER: String;
}

/// The route template of a request path (`axum`'s matched-path feature
/// is not enabled): only the shapes the router serves.
fn route_of(path: &str) -> &'static str {
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match segs.as_slice() {
        ["metrics"] => "/metrics",
        ["api", "overview"] => "/api/overview",
        ["api", "cluster"] => "/api/cluster",
        ["api", "queues"] => "/api/queues",
        ["api", "queues", _, "jobs"] => "/api/queues/{name}/jobs",
        ["api", "queues", _, "pause"] => "/api/queues/{name}/pause",
        ["api", "queues", _, "redrive"] => "/api/queues/{name}/redrive",
        ["api", "jobs", _] => "/api/jobs/{id}",
        ["api", "jobs", _, "delete"] => "/api/jobs/{id}/delete",
        _ => "",
    }
}

/// The command a route amounts to, whose permission it needs (None: any
/// authenticated user, e.g. the page and its assets).
fn route_command(route: &str, p: &HashMap<String, String>) -> Option<Vec<Vec<u8>>> {
    let arg = |k: &str| p.get(k).map(|v| v.as_bytes().to_vec()).unwrap_or_default();
    let words = |w: &[&str]| w.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
    let mut cmd = match route {
        "/metrics" | "/api/overview" => words(&["INFO"]),
        "/api/cluster" => words(&["CLUSTER", "NODES"]),
        "/api/queues" => words(&["QSCAN"]),
        "/api/queues/{name}/jobs" => words(&["JSCAN", "0", "QUEUE"]),
        "/api/queues/{name}/pause" => words(&["PAUSE"]),
        "/api/queues/{name}/redrive" => words(&["REDRIVE", "FROM"]),
        "/api/jobs/{id}" => words(&["SHOW"]),
        "/api/jobs/{id}/delete" => words(&["DELJOB"]),
        _ => return None,
    };
    if route.contains("{name}") {
        cmd.push(arg("name"));
    }
    if route.contains("{id}") {
        cmd.push(arg("id"));
    }
    if route.ends_with("/pause") {
        cmd.push(b"all".to_vec());
    }
    Some(cmd)
}

fn refuse(status: StatusCode, text: String) -> Response {
    let mut r = (status, text).into_response();
    if status == StatusCode::UNAUTHORIZED {
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"disque\", charset=\"UTF-8\""),
        );
    }
    r
}

/// Basic auth as an ACL user, the route's permission, and the CSRF
/// header on POST.
async fn guard(
    State(st): State<AppState>,
    params: Option<Path<HashMap<String, String>>>,
    req: Request,
    next: Next,
) -> Response {
    let creds = credentials(req.headers());
    let route = route_of(req.uri().path());
    let params = params.map(|Path(p)| p).unwrap_or_default();
    let route_cmd = route_command(route, &params);
    let verdict = st.shared.call(move |node, now| {
        let user = match &creds {
            Some((user, pass)) => {
                let ok = node
                    .acl
                    .get(user)
                    .is_some_and(|u| u.enabled && u.password_ok(pass));
                if !ok {
                    node.acl.log.add(
                        crate::acl::log::Reason::Auth,
                        "AUTH".into(),
                        user.clone(),
                        format!("http route={route}"),
                        now,
                    );
                    return Err((
                        StatusCode::UNAUTHORIZED,
                        "WRONGPASS invalid username-password pair or user is disabled.\n".into(),
                    ));
                }
                user.clone()
            }
            None if node.acl.requires_auth() => {
                return Err((
                    StatusCode::UNAUTHORIZED,
                    "authentication required (an ACL user, or \"default\" with the requirepass password)\n".into(),
                ));
            }
            None => crate::acl::DEFAULT_USER.to_string(),
        };
        if let (Some(cmd), Some(u)) = (route_cmd, node.acl.get(&user)) {
            let args: Vec<&[u8]> = cmd.iter().map(|a| &a[..]).collect();
            let name = String::from_utf8_lossy(args[0]).to_ascii_lowercase();
            if let Some(idx) = crate::acl::names::index(&name) {
                use crate::acl::check::{judge, Denied};
                let denied = match judge(u, &node.engine, idx, &args) {
                    Ok(()) => None,
                    Err(Denied::Command(c)) => Some(format!(
                        "NOPERM this user has no permissions to run the '{c}' command\n"
                    )),
                    Err(_) => Some("NOPERM No permissions to access a key\n".to_string()),
                };
                if let Some(text) = denied {
                    return Err((StatusCode::FORBIDDEN, text));
                }
            }
        }
        Ok(user)
    })
    .await;
    let user = match verdict {
        Ok(u) => u,
        Err((status, text)) => return refuse(status, text),
    };
    let safe = req.method() == Method::GET || req.method() == Method::HEAD;
    if !safe && !req.headers().contains_key(ACTION_HEADER) {
        return (
            StatusCode::FORBIDDEN,
            "state-changing requests need the X-Disque-Action header\n",
        )
            .into_response();
    }
    let mut resp = HTTP_USER.scope(user, next.run(req)).await;
    let h = resp.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    resp
}

/// `Authorization: Basic base64(<user>:<password>)`, as (user, password);
/// an empty user name means `default`. None without (usable) credentials.
fn credentials(headers: &HeaderMap) -> Option<(String, Vec<u8>)> {
    let v = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())?;
    let creds = v
        .strip_prefix("Basic ")
        .or_else(|| v.strip_prefix("basic "))?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(creds.trim())
        .ok()?;
    let colon = decoded.iter().position(|&c| c == b':')?;
    let user = String::from_utf8_lossy(&decoded[..colon]).into_owned();
    let user = if user.is_empty() {
        crate::acl::DEFAULT_USER.to_string()
    } else {
        user
    };
    Some((user, decoded[colon + 1..].to_vec()))
}

async fn accept_loop(shared: Arc<Shared>, listener: TcpListener, app: Router) {
    let mut shutdown = shared.shutdown_rx();
    loop {
        let r = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.changed() => return,
        };
        match r {
            Ok((stream, addr)) => {
                let _ = stream.set_nodelay(true);
                // With TLS configured (tls-port), the endpoint speaks HTTPS
                // with the client port's certificate and client-auth policy.
                match shared.tls.client_acceptor() {
                    Some(acceptor) => {
                        let app = app.clone();
                        tokio::spawn(async move {
                            match tokio::time::timeout(HEADER_TIMEOUT, acceptor.accept(stream))
                                .await
                            {
                                Ok(Ok(s)) => serve_connection(s, addr, app).await,
                                Ok(Err(e)) => {
                                    tracing::debug!(peer = %addr, error = %e, "HTTPS handshake failed.");
                                }
                                Err(_) => {
                                    tracing::debug!(peer = %addr, "HTTPS handshake timed out.")
                                }
                            }
                        });
                    }
                    None => {
                        tokio::spawn(serve_connection(stream, addr, app.clone()));
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "HTTP accept failed.");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Serve one HTTP/1.1 connection (any byte stream: TCP or TLS).
async fn serve_connection<S>(stream: S, peer: SocketAddr, app: Router)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let io = hyper_util::rt::TokioIo::new(stream);
    let svc = hyper_util::service::TowerToHyperService::new(app);
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .serve_connection(io, svc);
    if let Ok(Err(e)) = tokio::time::timeout(CONNECTION_LIFETIME, conn).await {
        tracing::debug!(peer = %peer, error = %e, "HTTP connection error.");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_auth_credentials_and_route_commands() {
        let mut h = HeaderMap::new();
        assert!(credentials(&h).is_none());
        let enc = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let set = |h: &mut HeaderMap, v: String| {
            h.insert(
                header::AUTHORIZATION,
                HeaderValue::from_str(&v).unwrap_or(HeaderValue::from_static("")),
            );
        };
        set(&mut h, format!("Basic {}", enc("alice:p:w")));
        assert_eq!(credentials(&h), Some(("alice".into(), b"p:w".to_vec())));
        set(&mut h, format!("Basic {}", enc(":pw")));
        assert_eq!(credentials(&h), Some(("default".into(), b"pw".to_vec())));
        set(&mut h, "Basic !!!".into());
        assert!(credentials(&h).is_none());
        let p: HashMap<String, String> = [("name".to_string(), "q 1".to_string())].into();
        assert_eq!(
            route_command("/api/queues/{name}/pause", &p),
            Some(vec![b"PAUSE".to_vec(), b"q 1".to_vec(), b"all".to_vec()])
        );
        assert_eq!(route_command("/", &p), None);
        assert_eq!(
            route_of("/api/queues/a%20b/jobs"),
            "/api/queues/{name}/jobs"
        );
        assert_eq!(route_of("/api/jobs/x/delete"), "/api/jobs/{id}/delete");
        assert_eq!(route_of("/"), "");
    }
}
