//! WAITJOB: clients blocked until a job this node holds ends. The engine
//! calls `job_finished` wherever a job ends locally (acknowledged - also
//! when the SETACK comes from another node -, expired, deleted,
//! dead-lettered); timeouts are decided by `tick`, like GETJOB's. The
//! outcome leaves as `Wake::JobEnded`.

use std::collections::BTreeSet;

use super::{ClientId, Engine, JobEnd, Wake};
use crate::domain::job::{JobId, JobState};
use crate::errors::WireError;

struct Waiter {
    id: JobId,
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
    /// The job already ended (acknowledged or dead-lettered).
    Ended(JobEnd),
    /// The client waits; its answer comes as a `Wake::JobEnded`.
    Blocked,
    Error(WireError),
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
        if self.is_cancelled(&id) {
            return WaitJobOutcome::Ended(JobEnd::Cancelled);
        }
        let Some(h) = self.lookup(&id) else {
            return WaitJobOutcome::Error(WireError::NoJob);
        };
        if self.job(h).is_some_and(|j| j.state == JobState::Acked) {
            return WaitJobOutcome::Ended(JobEnd::Acked);
        }
        if self.ext_of(h).is_some_and(|x| x.is_dead()) {
            return WaitJobOutcome::Ended(JobEnd::Dead);
        }
        let deadline = if timeout == 0 {
            u64::MAX
        } else {
            now.saturating_add(timeout)
        };
        let w = &mut self.waitjobs;
        w.remove(client);
        w.by_client.insert(client, Waiter { id, deadline });
        w.by_job.entry(id).or_default().push(client);
        if deadline != u64::MAX {
            w.timeouts.insert((deadline, client));
        }
        WaitJobOutcome::Blocked
    }

    /// A job ended here: wake its WAITJOB clients with `outcome`.
    pub(crate) fn job_finished(&mut self, id: &JobId, outcome: JobEnd) {
        if self.waitjobs.is_empty() {
            return;
        }
        let outcome = match outcome {
            JobEnd::Acked if self.is_cancelled(id) => JobEnd::Cancelled,
            o => o,
        };
        let Some(clients) = self.waitjobs.by_job.get(id).cloned() else {
            return;
        };
        for c in clients {
            if self.waitjobs.remove(c).is_some() {
                self.wake(c, Wake::JobEnded(outcome));
            }
        }
    }

    /// WAITJOB clients whose timeout passed.
    pub(crate) fn expire_job_waiters(&mut self, now: u64) {
        while let Some(&(t, c)) = self.waitjobs.timeouts.first() {
            // Strictly after the deadline, like GETJOB (ms truncation).
            if t >= now {
                break;
            }
            if self.waitjobs.remove(c).is_some() {
                self.wake(c, Wake::JobEnded(JobEnd::Timeout));
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
