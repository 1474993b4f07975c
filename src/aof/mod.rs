//! Append-only file persistence (WIRE 10). Not wired in yet: the node
//! runs memory-only and these entry points report that.

use crate::node::Node;

/// Synchronous full rewrite (SHUTDOWN REWRITE-AOF).
pub fn rewrite_now(node: &mut Node) -> Result<(), String> {
    let _ = node;
    Ok(())
}

/// BGREWRITEAOF.
pub fn start_rewrite(node: &mut Node, now: u64) -> Result<(), String> {
    let _ = (node, now);
    Ok(())
}

/// DEBUG LOADAOF.
pub fn debug_reload(node: &mut Node, now: u64) -> Result<(), String> {
    let _ = (node, now);
    Ok(())
}

/// `disque-server --check-aof FILE [--fix]`: returns the exit code.
pub fn check_aof_main(file: &str, fix: bool) -> i32 {
    let _ = fix;
    eprintln!("AOF checking is not available yet: {file}");
    1
}
