//! The Prometheus exporter: a `Registry` built once with one collector
//! that encodes a `Snapshot` of the node taken by a brief owner task at
//! scrape time. Gauges (queue lengths, link state) are read, never pushed;
//! per-queue series are bounded to the busiest `metrics-max-queues`
//! queues, with node-wide totals beside them.

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::commands::COMMANDS;
use crate::engine::counters::{JobCounters, PeerStat, QueueStat};
use crate::node::Node;
use crate::protocol::bus::message::type_name;
use crate::support::histogram;

/// Everything one scrape reports.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub counters: JobCounters,
    pub oom_refused: u64,
    /// (command name, latency in µs) for commands called at least once.
    pub commands: Vec<(&'static str, histogram::Snapshot)>,
    /// The busiest queues, at most `metrics-max-queues`.
    pub queues: Vec<QueueStat>,
    pub queue_count: u64,
    pub queued_jobs: u64,
    pub blocked_clients: u64,
    /// Producers blocked in ADDJOB ... MAXLEN WAIT.
    pub producers_waiting: u64,
    pub registered_jobs: u64,
    pub peers: Vec<PeerStat>,
    pub link_connects: std::collections::HashMap<u32, u64>,
    pub aof_enabled: bool,
    pub aof_size: u64,
    pub aof_rewrite_in_progress: bool,
    pub aof_last_write_ok: bool,
    pub aof_last_rewrite_ok: bool,
    pub memory_used: u64,
    pub memory_max: u64,
    pub memory_level: u8,
    pub connected_clients: u64,
    pub uptime_s: u64,
    /// The spill tier's figures, when `spill yes`: engine stats, then
    /// (corrupt records, I/O errors) seen by the spill thread, and the
    /// waits for its writes instead of -OOM.
    pub spill: Option<(crate::engine::spill::SpillStats, u64, u64, u64)>,
    /// Live schedules, and their tick counters on this node (deleted
    /// schedules' included).
    pub schedules: u64,
    pub schedule_ticks: crate::engine::schedule::TickStats,
    /// Batches known here by BATCH STATUS state, those not yet done
    /// (neither cancelled nor with every callback added), and the
    /// callbacks this node added.
    pub batches: crate::engine::batch::BatchTotals,
    pub batches_open: u64,
    pub batch_callbacks_added: u64,
}

impl Snapshot {
    /// Copy what a scrape needs; call on the owner thread (it is brief:
    /// one pass over the queues, no per-job work beyond each queue head).
    pub fn take(node: &Node, now: u64) -> Snapshot {
        let mut queues = node.engine.queue_stats(now);
        let queue_count = queues.len() as u64;
        let queued_jobs = queues.iter().map(|q| q.len).sum();
        let blocked_clients = queues.iter().map(|q| q.blocked).sum();
        let max = usize::try_from(node.config.metrics_max_queues).unwrap_or(usize::MAX);
        if queues.len() > max {
            // Longest first, then the most traffic: the queues worth a
            // series of their own.
            queues.select_nth_unstable_by_key(max, |q| {
                std::cmp::Reverse((q.len, q.jobs_in + q.jobs_out))
            });
            queues.truncate(max);
        }
        queues.sort_by(|a, b| a.name.cmp(&b.name));
        let commands = COMMANDS
            .iter()
            .zip(&node.command_stats.cmd_latency)
            .filter(|(_, h)| h.count() > 0)
            .map(|(c, h)| (c.name, h.snapshot()))
            .collect();
        Snapshot {
            counters: node.engine.counters().clone(),
            oom_refused: node.command_stats.oom_refused,
            commands,
            queues,
            queue_count,
            queued_jobs,
            blocked_clients,
            producers_waiting: node.engine.producers_waiting() as u64,
            registered_jobs: node.engine.registered_jobs() as u64,
            peers: node.engine.peer_stats(),
            link_connects: crate::observe::metrics::shell().link_connects(),
            aof_enabled: node.aof.state != crate::node::persistence::AofState::Off,
            aof_size: node.aof.current_size,
            aof_rewrite_in_progress: node.aof.rewrite_in_progress,
            aof_last_write_ok: node.aof.last_write_error.is_none(),
            aof_last_rewrite_ok: node.aof.last_rewrite_ok,
            memory_used: crate::os::allocator::allocated() as u64,
            memory_max: node.engine.maxmemory(),
            memory_level: node.engine.memory_level(),
            connected_clients: node.clients.len() as u64,
            uptime_s: now.saturating_sub(node.start_time) / 1000,
            spill: node.config.spill.then(|| {
                let io = node.spill.io.as_ref().map(|io| &io.stats);
                let load = |f: fn(&crate::spill::IoStats) -> &std::sync::atomic::AtomicU64| {
                    io.map_or(0, |s| f(s).load(std::sync::atomic::Ordering::Relaxed))
                };
                (
                    node.engine.spill_stats(),
                    load(|s| &s.corrupt),
                    load(|s| &s.io_errors),
                    node.spill.memory_waited,
                )
            }),
            schedules: node.engine.schedule_count() as u64,
            schedule_ticks: node.engine.schedule_totals(),
            batches: node.engine.batch_totals(),
            batches_open: node.engine.batch_open_count() as u64,
            batch_callbacks_added: node.engine.batch_callbacks_added(),
        }
    }
}

type Source = Box<dyn Fn() -> Option<Snapshot> + Send + Sync>;

struct NodeCollector {
    source: Source,
}

impl fmt::Debug for NodeCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NodeCollector")
    }
}

/// Renders the exposition; cheap to share between HTTP requests.
pub struct Exporter {
    registry: Registry,
}

impl Exporter {
    /// `source` takes a snapshot (None when the node is gone).
    pub fn new(source: impl Fn() -> Option<Snapshot> + Send + Sync + 'static) -> Exporter {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(NodeCollector {
            source: Box::new(source),
        }));
        Exporter { registry }
    }

    /// The Prometheus text format (0.0.4).
    pub fn render(&self) -> Result<String, fmt::Error> {
        let mut out = String::with_capacity(16 * 1024);
        prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

fn counter(e: &mut DescriptorEncoder, name: &str, help: &str, v: u64) -> fmt::Result {
    let m = ConstCounter::new(v);
    m.encode(e.encode_descriptor(name, help, None, m.metric_type())?)
}

fn gauge<V>(e: &mut DescriptorEncoder, name: &str, help: &str, v: V) -> fmt::Result
where
    ConstGauge<V>: EncodeMetric,
{
    let m = ConstGauge::new(v);
    m.encode(e.encode_descriptor(name, help, None, m.metric_type())?)
}

fn float_counter(e: &mut DescriptorEncoder, name: &str, help: &str, v: f64) -> fmt::Result {
    let m = ConstCounter::new(v);
    m.encode(e.encode_descriptor(name, help, None, m.metric_type())?)
}

type Labels = Vec<(&'static str, String)>;

fn counter_family(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: &[(Labels, u64)],
) -> fmt::Result {
    if rows.is_empty() {
        return Ok(());
    }
    let mut me = e.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, v) in rows {
        ConstCounter::new(*v).encode(me.encode_family(labels)?)?;
    }
    Ok(())
}

fn gauge_family<V: Copy>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: &[(Labels, V)],
) -> fmt::Result
where
    ConstGauge<V>: EncodeMetric,
{
    if rows.is_empty() {
        return Ok(());
    }
    let mut me = e.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, v) in rows {
        ConstGauge::new(*v).encode(me.encode_family(labels)?)?;
    }
    Ok(())
}

/// `per_second`: histogram units in a second (1e6 for µs, 1e3 for ms).
fn histogram_family(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: &[(Labels, &histogram::Snapshot)],
    per_second: f64,
) -> fmt::Result {
    if rows.is_empty() {
        return Ok(());
    }
    let mut me = e.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for (labels, h) in rows {
        let buckets = h.buckets(per_second);
        let sum = h.sum as f64 / per_second;
        if labels.is_empty() {
            me.encode_histogram::<NoLabelSet>(sum, h.count(), &buckets, None)?;
        } else {
            me.encode_family(labels)?.encode_histogram::<NoLabelSet>(
                sum,
                h.count(),
                &buckets,
                None,
            )?;
        }
    }
    Ok(())
}

fn q(name: &[u8]) -> Labels {
    vec![("queue", String::from_utf8_lossy(name).into_owned())]
}

impl Collector for NodeCollector {
    fn encode(&self, mut e: DescriptorEncoder) -> fmt::Result {
        let Some(s) = (self.source)() else {
            return Ok(());
        };
        let c = &s.counters;
        let e = &mut e;
        for (name, help, v) in [
            (
                "disque_jobs_added",
                "Jobs created by ADDJOB on this node.",
                c.added,
            ),
            (
                "disque_jobs_delivered",
                "Jobs handed to GETJOB consumers.",
                c.delivered,
            ),
            (
                "disque_jobs_acked",
                "Jobs acknowledged by ACKJOB or FASTACK on this node.",
                c.acked,
            ),
            (
                "disque_jobs_nacked",
                "NACKs that put a job back in its queue.",
                c.nacked,
            ),
            (
                "disque_jobs_requeued",
                "Jobs re-queued by their retry timer.",
                c.requeued,
            ),
            (
                "disque_jobs_expired",
                "Jobs deleted because their TTL elapsed.",
                c.expired,
            ),
            (
                "disque_jobs_evicted",
                "Jobs evicted to get under maxmemory.",
                c.evicted,
            ),
            (
                "disque_jobs_dead_lettered",
                "Jobs moved to a dead-letter queue.",
                c.dead_lettered,
            ),
            (
                "disque_federation_imported_jobs",
                "Jobs received from other nodes (YOURJOBS).",
                c.imported,
            ),
            (
                "disque_schedule_ticks_fired",
                "Schedule ticks this node added (SCHEDULE).",
                s.schedule_ticks.fired,
            ),
            (
                "disque_schedule_ticks_deduplicated",
                "Schedule ticks this node found added by another node.",
                s.schedule_ticks.deduplicated,
            ),
            (
                "disque_schedule_ticks_skipped",
                "Schedule ticks not added because the previous one was unacknowledged (OVERLAP skip).",
                s.schedule_ticks.skipped,
            ),
            (
                "disque_schedule_ticks_expired",
                "Schedule ticks given up after dedup-window without seeing them added.",
                s.schedule_ticks.expired,
            ),
        ] {
            counter(e, name, help, v)?;
        }
        gauge(
            e,
            "disque_schedules",
            "Schedules defined (SCHEDULE LIST).",
            s.schedules,
        )?;
        let b = &s.batches;
        gauge_family(
            e,
            "disque_batches",
            "Batches known on this node, by BATCH STATUS state: open (not committed), committed (members pending), succeeded, failed (a member dead-lettered), cancelled.",
            &[
                (vec![("state", "open".into())], b.open),
                (vec![("state", "committed".into())], b.committed),
                (vec![("state", "succeeded".into())], b.succeeded),
                (vec![("state", "failed".into())], b.failed),
                (vec![("state", "cancelled".into())], b.cancelled),
            ],
        )?;
        gauge(
            e,
            "disque_batches_active",
            "Batches neither cancelled nor with every callback added (INFO batches_open).",
            s.batches_open,
        )?;
        counter(
            e,
            "disque_batch_callbacks_added",
            "Batch callback jobs this node added (BATCH ONSUCCESS / ONCOMPLETE).",
            s.batch_callbacks_added,
        )?;
        counter(
            e,
            "disque_producer_waits",
            "ADDJOB ... MAXLEN WAIT producers that blocked on a full queue.",
            c.producer_waits,
        )?;
        counter(
            e,
            "disque_producer_wait_timeouts",
            "Producers whose WAIT expired before their queue had room (MAXLEN error).",
            c.producer_timeouts,
        )?;
        float_counter(
            e,
            "disque_producer_wait_seconds",
            "Time producers spent waiting for room in a queue (finished waits).",
            c.producer_wait_ms as f64 / 1e3,
        )?;
        counter_family(
            e,
            "disque_commands_refused",
            "Commands refused: -OOM (maxmemory) and -NOREPL (replication not possible or timed out).",
            &[
                (vec![("reason", "oom".into())], s.oom_refused),
                (vec![("reason", "norepl".into())], c.norepl),
            ],
        )?;
        histogram_family(
            e,
            "disque_replication_latency_seconds",
            "Time from ADDJOB to enough GOTJOB confirmations (synchronous replication).",
            &[(vec![], &c.repl_latency.snapshot())],
            1e3,
        )?;
        let cmd_rows: Vec<(Labels, &histogram::Snapshot)> = s
            .commands
            .iter()
            .map(|(n, h)| (vec![("command", (*n).to_string())], h))
            .collect();
        histogram_family(
            e,
            "disque_command_duration_seconds",
            "Command execution time on the node's owner, by command.",
            &cmd_rows,
            1e6,
        )?;

        if let Some((st, corrupt, io_errors, memory_waits)) = &s.spill {
            for (name, help, v) in [
                (
                    "disque_spill_jobs",
                    "Jobs whose body is only on disk (spill tier).",
                    st.jobs,
                ),
                (
                    "disque_spill_whole_jobs",
                    "Of those, jobs stored whole on disk (spill-whole-jobs).",
                    st.whole_jobs,
                ),
                (
                    "disque_spill_whole_copies",
                    "Of those, replicas' copies waiting for their retry.",
                    st.whole_copies,
                ),
                (
                    "disque_spill_disk_bytes",
                    "Bytes of spill segment files, live and dead records.",
                    st.disk_bytes,
                ),
                (
                    "disque_spill_live_bytes",
                    "Bytes of live records in the spill segments.",
                    st.live_bytes,
                ),
                ("disque_spill_segments", "Spill segment files.", st.segments),
                (
                    "disque_spill_active",
                    "1 while job bodies are being spilled (memory above spill-watermark).",
                    u64::from(st.active),
                ),
            ] {
                gauge(e, name, help, v)?;
            }
            gauge_family(
                e,
                "disque_spill_paused",
                "1 when spilling is paused, by reason: disk-full and write-error (a failed write, retried later), disk-budget (spill-max-disk spent). Disque's memory levels then apply.",
                &[
                    (
                        vec![("reason", "disk-full".into())],
                        u64::from(st.fault == Some(crate::engine::spill::SpillFault::DiskFull)),
                    ),
                    (
                        vec![("reason", "write-error".into())],
                        u64::from(st.fault == Some(crate::engine::spill::SpillFault::WriteError)),
                    ),
                    (
                        vec![("reason", "disk-budget".into())],
                        u64::from(st.disk_budget_full),
                    ),
                ],
            )?;
            for (name, help, v) in [
                (
                    "disque_spill_jobs_written",
                    "Job bodies moved to disk.",
                    st.spilled_total,
                ),
                (
                    "disque_spill_disk_reads",
                    "Job bodies read back into RAM (page-ins).",
                    st.reads,
                ),
                (
                    "disque_spill_copies_acked_on_disk",
                    "Replicas' copies acknowledged while on disk, dropped without a read.",
                    st.copies_acked_on_disk,
                ),
                (
                    "disque_spill_compactions",
                    "Spill segments whose live records were copied forward.",
                    st.compactions,
                ),
                (
                    "disque_spill_segments_deleted",
                    "Spill segment files deleted (no live record left).",
                    st.unlinked,
                ),
                (
                    "disque_spill_corrupt_records",
                    "Spill records that failed their checksum, length or ID check (never served).",
                    (*corrupt).max(st.corrupt),
                ),
                (
                    "disque_spill_io_errors",
                    "Spill segment reads and writes that failed.",
                    st.write_errors + io_errors,
                ),
                (
                    "disque_spill_memory_waits",
                    "Waits of deny-oom commands for a spill write to land instead of failing with -OOM.",
                    *memory_waits,
                ),
            ] {
                counter(e, name, help, v)?;
            }
        }
        gauge(
            e,
            "disque_registered_jobs",
            "Jobs known to this node, in any state.",
            s.registered_jobs,
        )?;
        gauge(e, "disque_queues", "Queues on this node.", s.queue_count)?;
        gauge(
            e,
            "disque_queued_jobs",
            "Queued jobs, all queues.",
            s.queued_jobs,
        )?;
        gauge(
            e,
            "disque_blocked_clients",
            "Clients blocked in GETJOB, all queues.",
            s.blocked_clients,
        )?;
        gauge(
            e,
            "disque_producers_waiting",
            "Producers blocked in ADDJOB ... MAXLEN WAIT until their queue has room.",
            s.producers_waiting,
        )?;
        gauge(
            e,
            "disque_queue_series_omitted",
            "Queues left out of the per-queue series (metrics-max-queues).",
            s.queue_count.saturating_sub(s.queues.len() as u64),
        )?;
        let rows = |f: &dyn Fn(&QueueStat) -> u64| -> Vec<(Labels, u64)> {
            s.queues.iter().map(|x| (q(&x.name), f(x))).collect()
        };
        gauge_family(
            e,
            "disque_queue_length",
            "Queued jobs per queue.",
            &rows(&|x| x.len),
        )?;
        let ages: Vec<(Labels, f64)> = s
            .queues
            .iter()
            .map(|x| (q(&x.name), x.oldest_age_ms as f64 / 1000.0))
            .collect();
        gauge_family(
            e,
            "disque_queue_oldest_job_age_seconds",
            "Age of the oldest queued job per queue (0 when empty).",
            &ages,
        )?;
        gauge_family(
            e,
            "disque_queue_blocked_clients",
            "Clients blocked in GETJOB per queue.",
            &rows(&|x| x.blocked),
        )?;
        gauge_family(
            e,
            "disque_queue_paused",
            "1 when the queue is paused in that direction.",
            &s.queues
                .iter()
                .flat_map(|x| {
                    let mut a = q(&x.name);
                    a.push(("direction", "in".into()));
                    let mut b = q(&x.name);
                    b.push(("direction", "out".into()));
                    [(a, u64::from(x.paused_in)), (b, u64::from(x.paused_out))]
                })
                .collect::<Vec<_>>(),
        )?;
        counter_family(
            e,
            "disque_queue_jobs_in",
            "Jobs queued per queue.",
            &rows(&|x| x.jobs_in),
        )?;
        counter_family(
            e,
            "disque_queue_jobs_out",
            "Jobs dequeued per queue.",
            &rows(&|x| x.jobs_out),
        )?;

        let bus = crate::observe::metrics::shell().bus_counts();
        let by_type = |sent: bool| -> Vec<(Labels, u64)> {
            bus.iter()
                .map(|&(t, sn, rc)| {
                    (
                        vec![("type", type_name(t).to_ascii_lowercase())],
                        if sent { sn } else { rc },
                    )
                })
                .collect()
        };
        counter_family(
            e,
            "disque_bus_messages_sent",
            "Cluster bus messages sent, by type.",
            &by_type(true),
        )?;
        counter_family(
            e,
            "disque_bus_messages_received",
            "Cluster bus messages received, by type.",
            &by_type(false),
        )?;
        let peers: Vec<&PeerStat> = s.peers.iter().filter(|p| !p.myself).collect();
        let peer_labels =
            |p: &PeerStat| -> Labels { vec![("peer", p.id.clone()), ("addr", p.addr.clone())] };
        gauge(
            e,
            "disque_cluster_nodes",
            "Nodes known to this node, itself included.",
            s.peers.len() as u64,
        )?;
        gauge(
            e,
            "disque_cluster_reachable_peers",
            "Peers currently reachable (linked and not failing).",
            peers.iter().filter(|p| p.reachable).count() as u64,
        )?;
        gauge_family(
            e,
            "disque_bus_link_up",
            "1 while the outbound bus link to the peer is established.",
            &peers
                .iter()
                .map(|p| (peer_labels(p), u64::from(p.link)))
                .collect::<Vec<_>>(),
        )?;
        counter_family(
            e,
            "disque_bus_link_connects",
            "Outbound bus links established to the peer (the first plus reconnects).",
            &peers
                .iter()
                .map(|p| {
                    (
                        peer_labels(p),
                        s.link_connects.get(&p.idx).copied().unwrap_or(0),
                    )
                })
                .collect::<Vec<_>>(),
        )?;

        gauge(
            e,
            "disque_aof_enabled",
            "1 when the append-only file is on.",
            u64::from(s.aof_enabled),
        )?;
        gauge(e, "disque_aof_size_bytes", "Current AOF size.", s.aof_size)?;
        gauge(
            e,
            "disque_aof_rewrite_in_progress",
            "1 while an AOF rewrite runs.",
            u64::from(s.aof_rewrite_in_progress),
        )?;
        gauge(
            e,
            "disque_aof_last_write_ok",
            "0 after a failed AOF write or fsync.",
            u64::from(s.aof_last_write_ok),
        )?;
        gauge(
            e,
            "disque_aof_last_rewrite_ok",
            "0 when the last AOF rewrite failed.",
            u64::from(s.aof_last_rewrite_ok),
        )?;
        histogram_family(
            e,
            "disque_aof_fsync_duration_seconds",
            "Time spent in fsync of the AOF.",
            &[(vec![], &crate::observe::metrics::shell().fsync.snapshot())],
            1e6,
        )?;
        gauge(
            e,
            "disque_memory_used_bytes",
            "Live heap bytes (what maxmemory compares against).",
            s.memory_used,
        )?;
        gauge(e, "disque_memory_max_bytes", "maxmemory.", s.memory_max)?;
        gauge(
            e,
            "disque_memory_level",
            "0 normal, 1 above 75% of maxmemory (external replication), 2 above 95% (eviction, deny-oom).",
            u64::from(s.memory_level),
        )?;
        gauge(
            e,
            "disque_connected_clients",
            "Client connections.",
            s.connected_clients,
        )?;
        gauge(
            e,
            "disque_uptime_seconds",
            "Seconds since the node started.",
            s.uptime_s,
        )?;
        Ok(())
    }
}
