//! Small helpers with no knowledge of Disque: the slab behind the job and
//! queue tables, Redis-style strings and integers, the one wall-clock
//! read, and fixed-bucket histograms.

pub mod clock;
pub mod histogram;
pub mod slab;
pub mod strings;
#[cfg(test)]
pub mod temp_dir;
