//! What the process asks of the operating system: the container memory
//! limit (`cgroup`), the counting allocator (`allocator`) and OS queries
//! (`sys`).

pub mod allocator;
pub mod cgroup;
pub mod sys;
