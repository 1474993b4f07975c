//! Replies leave together at the end of a turn of the runtime, as Redis
//! writes every client's replies in `beforeSleep`. A connection that wrote
//! its replies as soon as its batch ran woke its client while the next
//! connection's batch was still to run: with 50 pipelining clients the
//! kernel's wake-up of a sleeping reader (an IPI on these VMs, 13-18 % of
//! the server's samples under `sock_def_readable`, against Redis's 5 %)
//! came once per batch. Yielding first lets every connection ready on the
//! thread run its batch, then the writes go out back to back while the
//! clients are still awake.
//!
//! The yield costs a runtime turn (an `epoll_wait` and a poll of the task)
//! when nothing else is ready: ~3 µs a command with one unpipelined client
//! (10 % of its CPU), and with four clients it still cost 8 % of their
//! throughput. So a thread yields only while its turns are busy: the
//! first yield to come back after a turn's batches counts them (the
//! runtime polls the I/O driver, then resumes the yielded tasks, the last
//! one first), and a turn with fewer than `WORTH` batches besides its
//! own lowers a small score; at zero the thread writes straight away and
//! only every `SKIP`th batch yields, to see whether the turns have grown.

use std::cell::Cell;

thread_local! {
    static TURN: Cell<Turn> = const {
        Cell::new(Turn {
            batches: 0,
            opened: false,
            probing: false,
            score: 0,
            skip: 0,
        })
    };
}

#[derive(Clone, Copy)]
struct Turn {
    /// Batches that reached their write since the turn opened.
    batches: u32,
    /// A yield came back since the last batch: the turn is open and has
    /// been counted.
    opened: bool,
    /// A probe's yield is out while the thread writes straight away.
    probing: bool,
    /// Busy turns in a row (capped): the thread yields while above zero.
    score: u8,
    /// Batches left to write straight away before the next probe.
    skip: u8,
}

/// Batches in a turn besides the counting one that make yielding worth it.
const WORTH: u32 = 4;

/// Writes made straight away between two probes.
const SKIP: u8 = 15;

/// Busy turns remembered: a quiet turn between busy ones (a connection
/// whose data came in while the yielded ones were resuming) does not
/// stop the yielding.
const SCORE_MAX: u8 = 4;

/// Wait, before writing a batch's replies, for the other connections
/// ready on this thread to run theirs (see the module's doc). True when
/// it yielded.
pub async fn before_write() -> bool {
    let go = TURN.with(|t| {
        let mut v = t.get();
        v.opened = false;
        let go = if v.score > 0 {
            true
        } else if v.skip > 0 {
            v.skip -= 1;
            false
        } else {
            // A probe counts the batches that come after it.
            if !v.probing {
                v.batches = 0;
            }
            v.probing = true;
            v.skip = SKIP;
            true
        };
        if go || v.probing {
            v.batches += 1;
        }
        t.set(v);
        go
    });
    if !go {
        return false;
    }
    tokio::task::yield_now().await;
    // A multi-thread runtime may resume the task on another worker: the
    // count is then that thread's, and the guess is only off once.
    TURN.with(|t| {
        let mut v = t.get();
        if !v.opened {
            let others = v.batches.saturating_sub(1);
            v.score = if others >= WORTH {
                (v.score + 1).min(SCORE_MAX)
            } else {
                v.score.saturating_sub(1)
            };
            v.batches = 0;
            v.opened = true;
            v.probing = false;
        }
        t.set(v);
    });
    true
}

#[cfg(test)]
mod tests {
    use super::{before_write, SKIP, TURN, WORTH};

    fn skip() -> u8 {
        TURN.with(|t| t.get().skip)
    }

    /// Alone on its thread a connection yields only to probe, once
    /// every `SKIP + 1` batches.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_lone_connection_yields_only_to_probe() {
        tokio::spawn(async {
            for _ in 0..3 {
                assert!(before_write().await);
                assert_eq!(skip(), SKIP);
                for _ in 0..SKIP {
                    assert!(!before_write().await);
                }
            }
        })
        .await
        .expect("task");
    }

    /// Connections ready together keep yielding (the server's runtime:
    /// a yield resumes after the tasks already queued): each turn, every
    /// connection runs one batch and then waits for its next request,
    /// which arrives for all of them together (a barrier here).
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn busy_connections_keep_yielding() {
        let conns = WORTH as usize + 4;
        let rounds = 20;
        let next = std::sync::Arc::new(tokio::sync::Barrier::new(conns));
        let tasks: Vec<_> = (0..conns)
            .map(|_| {
                let next = next.clone();
                tokio::spawn(async move {
                    let mut late = 0;
                    for round in 0..rounds {
                        let yielded = before_write().await;
                        // The first turns may probe; after that every
                        // batch yields.
                        if round >= 4 {
                            late += u32::from(yielded);
                        }
                        next.wait().await;
                    }
                    late
                })
            })
            .collect();
        let mut yields = 0;
        for t in tasks {
            yields += t.await.expect("task");
        }
        assert_eq!(yields, conns as u32 * (rounds - 4));
    }
}
