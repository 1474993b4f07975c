//! WAITJOB: clients blocked until a job this node holds ends. The engine
//! calls `job_finished` wherever a job ends locally (acknowledged - also
//! when the SETACK comes from another node -, expired, deleted,
//! dead-lettered); timeouts are decided by `tick`, like GETJOB's.

use std::collections::BTreeSet;

use tokio::sync::oneshot;

use super::Engine;
use crate::errors::WireError;
use crate::job::{JobId, JobState};
use crate::queue::ClientId;
use crate::resp::Reply;

struct Waiter {
    id: JobId,
    tx: oneshot::Sender<Reply>,
    /// u64::MAX = no timeout.
    deadline: u64,
}

/// Clients blocked in WAITJOB, by client and by job.
#[derive(Default)]
pub struct JobWaiters {
    by_client: super::Map<ClientId, Waiter>,
    by_job: super::Map<JobId, Vec<ClientId>>,
    timeouts: BTreeSet<(u64, ClientId)>,
}

impl JobWaiters {
    /// Job IDs are a client's: the engine's keyed hash state.
    pub fn with_hasher(state: super::HashState) -> Self {
        JobWaiters {
            by_client: super::Map::default(),
            by_job: super::Map::with_hasher(state),
            timeouts: BTreeSet::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.by_client.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_client.is_empty()
    }

    /// Earliest timeout.
    pub fn next_deadline(&self) -> Option<u64> {
        self.timeouts.first().map(|&(t, _)| t)
    }

    fn remove(&mut self, client: ClientId) -> Option<Waiter> {
        let w = self.by_client.remove(&client)?;
        self.timeouts.remove(&(w.deadline, client));
        if let Some(list) = self.by_job.get_mut(&w.id) {
            list.retain(|&c| c != client);
            if list.is_empty() {
                self.by_job.remove(&w.id);
            }
        }
        Some(w)
    }
}

pub enum WaitJobOutcome {
    Reply(Reply),
    Blocked(oneshot::Receiver<Reply>),
}

impl Engine {
    /// WAITJOB <id> [TIMEOUT ms]: `timeout` 0 = wait forever.
    pub fn waitjob(
        &mut self,
        client: ClientId,
        id: JobId,
        timeout: u64,
        now: u64,
    ) -> WaitJobOutcome {
        let Some(h) = self.lookup(&id) else {
            return WaitJobOutcome::Reply(WireError::NoJob.reply());
        };
        if self.job(h).is_some_and(|j| j.state == JobState::Acked) {
            return WaitJobOutcome::Reply(Reply::Status("acked".into()));
        }
        if self.ext_of(h).is_some_and(|x| x.is_dead()) {
            return WaitJobOutcome::Reply(Reply::Status("dead".into()));
        }
        let (tx, rx) = oneshot::channel();
        let deadline = if timeout == 0 {
            u64::MAX
        } else {
            now.saturating_add(timeout)
        };
        let w = &mut self.waitjobs;
        w.remove(client);
        w.by_client.insert(client, Waiter { id, tx, deadline });
        w.by_job.entry(id).or_default().push(client);
        if deadline != u64::MAX {
            w.timeouts.insert((deadline, client));
        }
        WaitJobOutcome::Blocked(rx)
    }

    /// A job ended here: wake its WAITJOB clients with `outcome`.
    pub(crate) fn job_finished(&mut self, id: &JobId, outcome: &'static str) {
        if self.waitjobs.is_empty() {
            return;
        }
        let Some(clients) = self.waitjobs.by_job.get(id).cloned() else {
            return;
        };
        for c in clients {
            if let Some(w) = self.waitjobs.remove(c) {
                let _ = w.tx.send(Reply::Status(outcome.into()));
            }
        }
    }

    /// WAITJOB clients whose timeout passed get a null reply.
    pub(crate) fn expire_job_waiters(&mut self, now: u64) {
        while let Some(&(t, c)) = self.waitjobs.timeouts.first() {
            // Strictly after the deadline, like GETJOB (ms truncation).
            if t >= now {
                break;
            }
            if let Some(w) = self.waitjobs.remove(c) {
                let _ = w.tx.send(Reply::NullBulk);
            } else {
                self.waitjobs.timeouts.remove(&(t, c));
            }
        }
    }

    /// Forget a disconnected client's WAITJOB.
    pub(crate) fn forget_job_waiter(&mut self, client: ClientId) {
        self.waitjobs.remove(client);
    }

    /// Number of clients blocked in WAITJOB.
    pub fn job_waiters(&self) -> usize {
        self.waitjobs.len()
    }
}
