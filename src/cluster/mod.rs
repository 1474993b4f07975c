//! The cluster bus: frame format (`message`), the persisted node table
//! (`nodes_conf`). Membership and job-message logic live in the engine;
//! socket handling lives in `server::bus`.

pub mod auth;
pub mod message;
pub mod nodes_conf;
