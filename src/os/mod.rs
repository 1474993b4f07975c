//! What the process asks of the operating system: the container memory
//! limit (`cgroup`), the counting allocator (`allocator`), OS queries
//! (`sys`) and the disk faults tests inject (`faults`, `DEBUG DISK-FAULT`).

pub mod allocator;
pub mod cgroup;
pub mod faults;
pub mod sys;
