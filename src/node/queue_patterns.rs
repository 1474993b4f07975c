//! GETJOB ... MATCH <glob> (docs/COMMANDS.md#getjob-match): the queues a glob
//! matches, cached per pattern until the engine's set of queues changes
//! (so a consumer polling many queues does not scan them all on every
//! call), handed to GETJOB in a rotating order so each matching queue
//! gets its turn to be served first.

use std::collections::HashMap;

use bytes::Bytes;

use crate::config::glob::glob_match;
use crate::engine::Engine;

/// Patterns remembered at most; a node seeing more distinct ones starts
/// over (consumers reuse a few patterns).
const MAX_PATTERNS: usize = 256;

struct Entry {
    generation: u64,
    /// Matching queue names, sorted.
    queues: Vec<Bytes>,
    /// Where the next call starts.
    next: usize,
}

/// The node's cache of GETJOB MATCH patterns.
#[derive(Default)]
pub struct PatternCache {
    entries: HashMap<Bytes, Entry>,
}

impl PatternCache {
    /// The queues `pattern` matches, starting one further than the last
    /// call with the same pattern.
    pub fn queues_for(&mut self, engine: &Engine, pattern: &[u8]) -> Vec<Bytes> {
        let generation = engine.queue_generation();
        // One lookup when the pattern is known (the common case).
        let e = match self.entries.get_mut(pattern) {
            Some(e) => e,
            None => {
                if self.entries.len() >= MAX_PATTERNS {
                    self.entries.clear();
                }
                let fresh = Entry {
                    generation: u64::MAX,
                    queues: Vec::new(),
                    next: 0,
                };
                self.entries
                    .entry(Bytes::copy_from_slice(pattern))
                    .or_insert(fresh)
            }
        };
        if e.generation != generation {
            e.queues = engine
                .queues()
                .iter()
                .filter(|(_, q)| glob_match(pattern, &q.name, false))
                .map(|(_, q)| q.name.clone())
                .collect();
            e.queues.sort();
            e.generation = generation;
        }
        let n = e.queues.len();
        if n == 0 {
            return Vec::new();
        }
        let start = e.next % n;
        e.next = e.next.wrapping_add(1);
        e.queues[start..]
            .iter()
            .chain(&e.queues[..start])
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_rotate_and_follow_new_queues() {
        let mut e = Engine::new([b'a'; 40], 7711, 1, 1000);
        for q in ["mail:a", "mail:b", "sms", "mail:c"] {
            e.queue_create(q.as_bytes(), 1000);
        }
        let mut c = PatternCache::default();
        let p = Bytes::from_static(b"mail:*");
        let names = |v: Vec<Bytes>| -> Vec<String> {
            v.iter()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .collect()
        };
        assert_eq!(names(c.queues_for(&e, &p)), ["mail:a", "mail:b", "mail:c"]);
        assert_eq!(names(c.queues_for(&e, &p)), ["mail:b", "mail:c", "mail:a"]);
        e.queue_create(b"mail:d", 1000);
        assert_eq!(
            names(c.queues_for(&e, &p)),
            ["mail:c", "mail:d", "mail:a", "mail:b"]
        );
        assert!(c.queues_for(&e, &Bytes::from_static(b"none*")).is_empty());
    }
}
