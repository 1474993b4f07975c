//! `ServerError`: why `server::run` refused to start a node. It owns no
//! failure of its own beyond the owner thread's spawn: it wraps the typed
//! errors of each startup edge (nodes.conf, TLS, listening sockets and the
//! HTTP endpoint, the AOF load and writer) and prints exactly their text,
//! which `main` shows on stderr as the fatal startup message.

use super::listener::BindError;
use super::nodes_conf::NodesConfFileError;
use crate::aof::AofError;
use crate::tls::TlsError;

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    NodesConf(#[from] NodesConfFileError),
    #[error("TLS configuration: {0}")]
    Tls(#[source] TlsError),
    #[error(transparent)]
    Bind(#[from] BindError),
    #[error("Starting the node's owner thread: {0}")]
    OwnerThread(#[source] std::io::Error),
    #[error(transparent)]
    Aof(#[from] AofError),
    #[error(transparent)]
    Acl(#[from] crate::acl::store::AclLoadError),
}
