//! The job table: jobs in a slab, an ID index that stores only 4-byte
//! handles (the ID lives once, inside the job), and the scheduler's ordered
//! set of wake-up times. Lookup is O(1), scheduling O(log n).

use std::collections::BTreeSet;
use std::hash::BuildHasher;

use hashbrown::HashTable;

use crate::job::{Job, JobId};
use crate::slab::Slab;

pub type JobHandle = u32;

pub struct JobStore {
    slab: Slab<Job>,
    index: HashTable<JobHandle>,
    hasher: std::collections::hash_map::RandomState,
    /// (awake time ms, handle) for every scheduled job.
    awake: BTreeSet<(u64, JobHandle)>,
}

impl Default for JobStore {
    fn default() -> Self {
        JobStore {
            slab: Slab::default(),
            index: HashTable::new(),
            hasher: std::collections::hash_map::RandomState::new(),
            awake: BTreeSet::new(),
        }
    }
}

impl JobStore {
    fn hash(&self, id: &JobId) -> u64 {
        self.hasher.hash_one(id.0)
    }

    pub fn len(&self) -> usize {
        self.slab.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slab.is_empty()
    }

    pub fn lookup(&self, id: &JobId) -> Option<JobHandle> {
        let slab = &self.slab;
        self.index
            .find(self.hash(id), |&h| slab.get(h).is_some_and(|j| j.id == *id))
            .copied()
    }

    /// Insert a job whose ID is not present (checked by the caller).
    pub fn insert(&mut self, job: Job) -> JobHandle {
        let hash = self.hash(&job.id);
        let h = self.slab.insert(job);
        let slab = &self.slab;
        let hasher = &self.hasher;
        self.index.insert_unique(hash, h, |&x| {
            slab.get(x).map(|j| hasher.hash_one(j.id.0)).unwrap_or(0)
        });
        h
    }

    /// Remove a job from the table and the scheduler.
    pub fn remove(&mut self, h: JobHandle) -> Option<Job> {
        let job = self.slab.get(h)?;
        let hash = self.hash(&job.id);
        if job.awakeme != 0 {
            self.awake.remove(&(job.awakeme, h));
        }
        if let Ok(entry) = self.index.find_entry(hash, |&x| x == h) {
            entry.remove();
        }
        self.slab.remove(h)
    }

    pub fn get(&self, h: JobHandle) -> Option<&Job> {
        self.slab.get(h)
    }

    pub fn get_mut(&mut self, h: JobHandle) -> Option<&mut Job> {
        self.slab.get_mut(h)
    }

    /// Set (or clear with 0) the job's wake-up time.
    pub fn schedule(&mut self, h: JobHandle, when: u64) {
        let Some(job) = self.slab.get_mut(h) else {
            return;
        };
        if job.awakeme == when {
            return;
        }
        if job.awakeme != 0 {
            self.awake.remove(&(job.awakeme, h));
        }
        job.awakeme = when;
        if when != 0 {
            self.awake.insert((when, h));
        }
    }

    /// Earliest scheduled wake-up, if any.
    pub fn next_awake(&self) -> Option<u64> {
        self.awake.first().map(|&(t, _)| t)
    }

    /// Pop the earliest job due at `now`, unscheduling it.
    pub fn pop_due(&mut self, now: u64) -> Option<JobHandle> {
        let &(t, h) = self.awake.first()?;
        if t > now {
            return None;
        }
        self.awake.remove(&(t, h));
        if let Some(j) = self.slab.get_mut(h) {
            j.awakeme = 0;
        }
        Some(h)
    }

    pub fn iter_from(&self, from: usize) -> impl Iterator<Item = (JobHandle, &Job)> {
        self.slab.iter_from(from)
    }

    pub fn slots(&self) -> usize {
        self.slab.capacity_slots()
    }

    pub fn handles(&self) -> Vec<JobHandle> {
        self.slab.handles()
    }

    pub fn clear(&mut self) {
        self.slab.clear();
        self.index = HashTable::new();
        self.awake.clear();
    }
}
