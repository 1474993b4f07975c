//! INFO (docs/COMMANDS.md#info): sections in Disque's field order.

use std::fmt::Write;

use bytes::Bytes;

use super::args::Args;
use super::{syntax_error, Ctx, Outcome, COMMANDS};
use crate::node::Node;
use crate::protocol::resp::Reply;

/// `jobstats`, `readiness` and `spill` (our extensions) are last so the default
/// set stays Disque's.
const SECTIONS: [&str; 12] = [
    "server",
    "clients",
    "memory",
    "jobs",
    "queues",
    "persistence",
    "stats",
    "cpu",
    "commandstats",
    "jobstats",
    "readiness",
    "spill",
];

pub fn info(ctx: &mut Ctx, args: &[&[u8]]) -> Outcome {
    let mut a = Args::new(args);
    if a.remaining() > 1 {
        return syntax_error();
    }
    let which = a
        .next()
        .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase());
    let wanted: Vec<&str> = match which.as_deref() {
        None | Some("default") => SECTIONS[..8].to_vec(),
        Some("all") | Some("everything") => SECTIONS.to_vec(),
        Some(s) => SECTIONS.iter().copied().filter(|x| *x == s).collect(),
    };
    let mut out = String::new();
    for (i, s) in wanted.iter().enumerate() {
        if i > 0 {
            out.push_str("\r\n");
        }
        section(ctx.node, s, ctx.now, &mut out);
    }
    Reply::Bulk(Bytes::from(out)).into()
}

/// `<n>B` below 1024, else two decimals and K/M/G/T/P.
pub fn human_bytes(n: u64) -> String {
    let units = ["K", "M", "G", "T", "P"];
    if n < 1024 {
        return format!("{n}B");
    }
    let mut v = n as f64 / 1024.0;
    let mut u = 0;
    while v >= 1024.0 && u < units.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.2}{}", units[u])
}

fn section(node: &Node, name: &str, now: u64, out: &mut String) {
    if name == "jobstats" {
        info_jobstats(node, out);
        return;
    }
    if name == "spill" {
        out.push_str("# Spill\r\n");
        crate::node::spill::info(node, out);
        return;
    }
    if name == "readiness" {
        // What /readyz answers (one definition: Node::readiness), for
        // `disque-server --healthcheck` and redis-cli users.
        let (ready, why) = match node.readiness() {
            Ok(()) => (1, String::new()),
            Err(why) => (0, why.to_string().replace(['\r', '\n'], " ")),
        };
        let _ = write!(
            out,
            "# Readiness\r\nready:{ready}\r\nnot_ready_reason:{why}\r\n"
        );
        return;
    }
    let mut line = |k: &str, v: &dyn std::fmt::Display| {
        let _ = write!(out, "{k}:{v}\r\n");
    };
    match name {
        "server" => {
            let uptime = now.saturating_sub(node.start_time) / 1000;
            line("# Server\r\ndisque_version", &crate::VERSION);
            line("disque_git_sha1", &"00000000");
            line("disque_git_dirty", &0);
            line("disque_build_id", &"0000000000000000");
            line("os", &crate::os::sys::os_string());
            line("arch_bits", &(usize::BITS));
            line("multiplexing_api", &"epoll");
            line("gcc_version", &"0.0.0");
            line("process_id", &std::process::id());
            line("run_id", &node.run_id);
            line("tcp_port", &node.tcp_port);
            line("uptime_in_seconds", &uptime);
            line("uptime_in_days", &(uptime / 86400));
            line("hz", &node.config.hz);
            line("executable", &node.executable);
            let cf = node
                .config
                .config_file
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            line("config_file", &cf);
        }
        "clients" => {
            line("# Clients\r\nconnected_clients", &node.clients.len());
            line("client_longest_output_list", &0);
            line("client_biggest_input_buf", &0);
            line("blocked_clients", &node.engine.blocked_clients());
        }
        "memory" => {
            let used = crate::os::allocator::allocated() as u64;
            let peak = crate::os::allocator::peak() as u64;
            let rss = crate::os::sys::rss_bytes();
            line("# Memory\r\nused_memory", &used);
            line("used_memory_human", &human_bytes(used));
            line("used_memory_rss", &rss);
            line("used_memory_peak", &peak);
            line("used_memory_peak_human", &human_bytes(peak));
            let frag = if used > 0 {
                rss as f64 / used as f64
            } else {
                0.0
            };
            line("mem_fragmentation_ratio", &format!("{frag:.2}"));
            line("mem_allocator", &"libc");
        }
        "jobs" => line("# Jobs\r\nregistered_jobs", &node.engine.registered_jobs()),
        "queues" => line("# Queues\r\nregistered_queues", &node.engine.queues().len()),
        "persistence" => {
            let a = &node.aof;
            line("# Persistence\r\nloading", &u8::from(a.loading.is_some()));
            line(
                "aof_enabled",
                &u8::from(a.state != crate::node::persistence::AofState::Off),
            );
            line("aof_state", &a.state.name());
            line("aof_rewrite_in_progress", &u8::from(a.rewrite_in_progress));
            line("aof_rewrite_scheduled", &u8::from(a.rewrite_scheduled));
            line("aof_last_rewrite_time_sec", &a.last_rewrite_time_sec);
            let cur = a
                .rewrite_start
                .map_or(-1, |s| (now.saturating_sub(s) / 1000) as i64);
            line("aof_current_rewrite_time_sec", &cur);
            line(
                "aof_last_bgrewrite_status",
                &if a.last_rewrite_ok { "ok" } else { "err" },
            );
            line(
                "aof_last_write_status",
                &if a.last_write_error.is_none() {
                    "ok"
                } else {
                    "err"
                },
            );
            if a.state != crate::node::persistence::AofState::Off {
                line("aof_current_size", &a.current_size);
                line("aof_base_size", &a.base_size);
                line("aof_pending_rewrite", &u8::from(a.rewrite_scheduled));
                let backlog = node.aof_writer.as_ref().map_or(0, |a| a.backlog());
                line("aof_buffer_length", &backlog);
                line("aof_rewrite_buffer_length", &0);
                line("aof_pending_bio_fsync", &0);
                line("aof_delayed_fsync", &0);
            }
            if let Some(l) = &a.loading {
                let perc = if l.total_bytes == 0 {
                    100.0
                } else {
                    l.loaded_bytes as f64 * 100.0 / l.total_bytes as f64
                };
                let elapsed = (now / 1000).saturating_sub(l.start_time);
                let eta = if l.loaded_bytes == 0 {
                    1
                } else {
                    (l.total_bytes.saturating_sub(l.loaded_bytes) as f64 * elapsed as f64
                        / l.loaded_bytes as f64) as u64
                };
                line("loading_start_time", &l.start_time);
                line("loading_total_bytes", &l.total_bytes);
                line("loading_loaded_bytes", &l.loaded_bytes);
                line("loading_loaded_perc", &format!("{perc:.2}"));
                line("loading_eta_seconds", &eta);
            }
        }
        "stats" => {
            let s = &node.stats;
            line(
                "# Stats\r\ntotal_connections_received",
                &s.total_connections,
            );
            line("total_commands_processed", &s.total_commands);
            line("instantaneous_ops_per_sec", &s.ops_per_sec);
            line("total_net_input_bytes", &s.net_input);
            line("total_net_output_bytes", &s.net_output);
            line("instantaneous_input_kbps", &format!("{:.2}", s.in_kbps));
            line("instantaneous_output_kbps", &format!("{:.2}", s.out_kbps));
            line("rejected_connections", &s.rejected_connections);
            line("latest_fork_usec", &0);
        }
        "cpu" => {
            let (sys, user) = crate::os::sys::cpu_times();
            line("# CPU\r\nused_cpu_sys", &format!("{sys:.2}"));
            line("used_cpu_user", &format!("{user:.2}"));
            line("used_cpu_sys_children", &"0.00");
            line("used_cpu_user_children", &"0.00");
        }
        "commandstats" => {
            out.push_str("# Commandstats\r\n");
            for (i, c) in COMMANDS.iter().enumerate() {
                let (calls, usec) = node.stats.cmd.get(i).copied().unwrap_or((0, 0));
                if calls > 0 {
                    let _ = write!(
                        out,
                        "cmdstat_{}:calls={calls},usec={usec},usec_per_call={:.2}\r\n",
                        c.name,
                        usec as f64 / calls as f64
                    );
                }
            }
        }
        _ => {}
    }
}

/// `jobstats`: the job-lifecycle totals for redis-cli users (an
/// extension, only shown by `INFO jobstats` / `INFO all`).
fn info_jobstats(node: &Node, out: &mut String) {
    let c = node.engine.counters();
    let t = node.engine.schedule_totals();
    let b = node.engine.batch_totals();
    let _ = write!(
        out,
        "# Jobstats\r\n\
         jobs_added:{}\r\n\
         jobs_delivered:{}\r\n\
         jobs_acked:{}\r\n\
         jobs_nacked:{}\r\n\
         jobs_requeued:{}\r\n\
         jobs_expired:{}\r\n\
         jobs_evicted:{}\r\n\
         jobs_dead_lettered:{}\r\n\
         jobs_imported:{}\r\n\
         refused_norepl:{}\r\n\
         refused_oom:{}\r\n\
         producers_waiting:{}\r\n\
         producer_waits:{}\r\n\
         producer_timeouts:{}\r\n\
         producer_wait_ms:{}\r\n\
         schedules:{}\r\n\
         schedule_ticks_fired:{}\r\n\
         schedule_ticks_deduplicated:{}\r\n\
         schedule_ticks_skipped:{}\r\n\
         schedule_ticks_expired:{}\r\n\
         async_copies_pending:{}\r\n\
         batches:{}\r\n\
         batches_open:{}\r\n\
         batches_committed:{}\r\n\
         batches_succeeded:{}\r\n\
         batches_failed:{}\r\n\
         batches_cancelled:{}\r\n\
         batch_callbacks_added:{}\r\n\
         jobs_waiting:{}\r\n\
         jobs_released:{}\r\n\
         jobs_dependency_failed:{}\r\n",
        c.added,
        c.delivered,
        c.acked,
        c.nacked,
        c.requeued,
        c.expired,
        c.evicted,
        c.dead_lettered,
        c.imported,
        c.norepl,
        node.command_stats.oom_refused,
        node.engine.producers_waiting(),
        c.producer_waits,
        c.producer_timeouts,
        c.producer_wait_ms,
        node.engine.schedule_count(),
        t.fired,
        t.deduplicated,
        t.skipped,
        t.expired,
        node.engine.async_copies_pending(),
        node.engine.batch_ids().len(),
        node.engine.batch_open_count(),
        b.committed,
        b.succeeded,
        b.failed,
        b.cancelled,
        node.engine.batch_callbacks_added(),
        node.engine.waiting_count(),
        node.engine.after_counters().0,
        node.engine.after_counters().1,
    );
}

#[cfg(test)]
mod tests {
    use super::human_bytes;

    #[test]
    fn human_sizes() {
        assert_eq!(human_bytes(1000), "1000B");
        assert_eq!(human_bytes(778432), "760.19K");
        assert_eq!(human_bytes(3 * 1024 * 1024), "3.00M");
    }
}
