//! The wire formats, pure and I/O-free: RESP requests and replies
//! (`resp`), cluster bus frames and their authentication (`bus`), and the
//! serialized job both of them and the AOF carry (`job_codec`).

pub mod bus;
pub mod job_codec;
pub mod resp;
