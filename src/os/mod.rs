//! What the process asks of the operating system: the container memory
//! limit (`cgroup`), the counting allocator (`memory`) and OS queries
//! (`sys`).

pub mod cgroup;
pub mod memory;
pub mod sys;
