//! The cluster bus: message framing now; links, gossip and failure
//! detection build on it.

pub mod message;
