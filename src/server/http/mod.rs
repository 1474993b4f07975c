//! The HTTP endpoint beside the RESP port (`http-port`, 0 = off): the
//! Prometheus exposition at `/metrics`, `/healthz` and `/readyz` for
//! probes, and the dashboard at `/` with its JSON API under `/api`.
//!
//! It runs on the node's tokio runtime with its own accept loop (hyper's
//! HTTP/1 connection driver around an axum `Router`), so the stream type
//! is ours to choose: a TLS stream can be handed to `serve_connection`
//! unchanged. Handlers reach the node through the same `Shared::with` as
//! client commands, one brief lock per request.
//!
//! With TLS configured (`tls-port` and the `tls-*` files), the endpoint
//! serves HTTPS only, with the client port's certificate and client
//! certificate policy (`tls-auth-clients`).
//!
//! Access: with `requirepass` set, everything except the probes needs
//! HTTP basic auth as user `default`; POST actions also need the
//! `X-Disque-Action` header, which a cross-site form cannot send and a
//! cross-site `fetch` cannot send without a CORS preflight we never
//! grant (CSRF).

mod api;
pub mod exporter;
mod health;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
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
    };
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
        .route("/api/queues/{name}/jobs", get(api::queue_jobs))
        .route("/api/queues/{name}/pause", post(api::pause))
        .route("/api/queues/{name}/redrive", post(api::redrive))
        .route("/api/jobs/{id}", get(api::show))
        .route("/api/jobs/{id}/delete", post(api::delete_job))
        .layer(axum::middleware::from_fn_with_state(state.clone(), guard));
    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .merge(guarded)
        .with_state(state)
}

async fn metrics(State(st): State<AppState>) -> Response {
    // Rendering takes the node lock briefly: keep it off the runtime's
    // async path anyway, as it is the one handler doing real work.
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

/// Basic auth (when `requirepass` is set) and the CSRF header on POST.
async fn guard(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let pass = st
        .shared
        .call(move |n, _| n.config.requirepass.clone().filter(|p| !p.is_empty()))
        .await;
    if let Some(pass) = pass {
        if !authorized(req.headers(), &pass) {
            return (
                StatusCode::UNAUTHORIZED,
                [(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Basic realm=\"disque\", charset=\"UTF-8\""),
                )],
                "authentication required (user \"default\", the requirepass password)\n",
            )
                .into_response();
        }
    }
    let safe = req.method() == Method::GET || req.method() == Method::HEAD;
    if !safe && !req.headers().contains_key(ACTION_HEADER) {
        return (
            StatusCode::FORBIDDEN,
            "state-changing requests need the X-Disque-Action header\n",
        )
            .into_response();
    }
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    resp
}

/// `Authorization: Basic base64(default:<requirepass>)`.
fn authorized(headers: &HeaderMap, pass: &str) -> bool {
    let Some(v) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let Some(creds) = v
        .strip_prefix("Basic ")
        .or_else(|| v.strip_prefix("basic "))
    else {
        return false;
    };
    let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(creds.trim()) else {
        return false;
    };
    let expected = format!("default:{pass}");
    crate::commands::auth::password_matches(&decoded, expected.as_bytes())
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
    fn basic_auth_needs_user_default_and_the_password() {
        let mut h = HeaderMap::new();
        assert!(!authorized(&h, "pw"));
        let enc = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_str(&format!("Basic {}", enc("default:pw")))
                .unwrap_or(HeaderValue::from_static("")),
        );
        assert!(authorized(&h, "pw"));
        assert!(!authorized(&h, "pW"));
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_str(&format!("Basic {}", enc("admin:pw")))
                .unwrap_or(HeaderValue::from_static("")),
        );
        assert!(!authorized(&h, "pw"));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic !!!"));
        assert!(!authorized(&h, "pw"));
    }
}
