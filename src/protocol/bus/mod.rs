//! The cluster bus wire format: frames (`message`) and the bus handshake
//! (`auth`). Pure codecs: membership and job-message logic live in the
//! engine, socket handling in `server::bus`, nodes.conf in
//! `server::nodes_conf` (text format in `engine::cluster`).

pub mod auth;
pub mod message;
