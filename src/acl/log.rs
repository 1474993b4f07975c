//! ACL LOG: denied commands, queues and failed authentications, newest
//! first, in Redis 7.2's entry shape. A repeat of the same denial (same
//! reason, context, object and user) within 60 seconds bumps the count of
//! the existing entry instead of adding one, as Redis does.

use std::collections::VecDeque;

use crate::protocol::resp::Reply;

/// Redis's `acllog-max-len` default.
pub const MAX_LEN: usize = 128;
/// Redis's ACL_LOG_GROUPING_MAX_TIME_DELTA.
const GROUPING_MS: u64 = 60_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    Command,
    Key,
    Auth,
}

impl Reason {
    fn as_str(self) -> &'static str {
        match self {
            Reason::Command => "command",
            Reason::Key => "key",
            Reason::Auth => "auth",
        }
    }
}

#[derive(Clone, Debug)]
struct Entry {
    id: u64,
    count: u64,
    reason: Reason,
    object: String,
    username: String,
    created: u64,
    updated: u64,
    client_info: String,
}

#[derive(Default)]
pub struct AclLog {
    entries: VecDeque<Entry>,
    next_id: u64,
}

impl AclLog {
    pub fn add(
        &mut self,
        reason: Reason,
        object: String,
        username: String,
        client_info: String,
        now: u64,
    ) {
        if let Some(e) = self.entries.iter_mut().find(|e| {
            e.reason == reason
                && e.object == object
                && e.username == username
                && now.saturating_sub(e.updated) < GROUPING_MS
        }) {
            e.count += 1;
            e.updated = now;
            e.client_info = client_info;
            return;
        }
        self.entries.push_front(Entry {
            id: self.next_id,
            count: 1,
            reason,
            object,
            username,
            created: now,
            updated: now,
            client_info,
        });
        self.next_id += 1;
        self.entries.truncate(MAX_LEN);
    }

    pub fn reset(&mut self) {
        self.entries.clear();
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// ACL LOG [count]: the newest `count` entries.
    pub fn reply(&self, count: usize, now: u64) -> Reply {
        Reply::Array(
            self.entries
                .iter()
                .take(count)
                .map(|e| {
                    let age = now.saturating_sub(e.created);
                    Reply::map(vec![
                        ("count", Reply::Integer(e.count as i64)),
                        ("reason", Reply::bulk_str(e.reason.as_str())),
                        ("context", Reply::bulk_str("toplevel")),
                        ("object", Reply::bulk_str(&e.object)),
                        ("username", Reply::bulk_str(&e.username)),
                        (
                            "age-seconds",
                            Reply::bulk_str(&format!("{}.{:03}", age / 1000, age % 1000)),
                        ),
                        ("client-info", Reply::bulk_str(&e.client_info)),
                        ("entry-id", Reply::Integer(e.id as i64)),
                        ("timestamp-created", Reply::Integer(e.created as i64)),
                        ("timestamp-last-updated", Reply::Integer(e.updated as i64)),
                    ])
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_repeats_and_caps() {
        let mut l = AclLog::default();
        l.add(
            Reason::Command,
            "getjob".into(),
            "p".into(),
            "id=1".into(),
            1000,
        );
        l.add(
            Reason::Command,
            "getjob".into(),
            "p".into(),
            "id=2".into(),
            2000,
        );
        assert_eq!(l.len(), 1);
        l.add(
            Reason::Command,
            "getjob".into(),
            "p".into(),
            "id=2".into(),
            70_000,
        );
        assert_eq!(l.len(), 2, "after 60 s a new entry");
        l.add(
            Reason::Key,
            "orders".into(),
            "p".into(),
            "id=2".into(),
            70_000,
        );
        assert_eq!(l.len(), 3);
        let Reply::Array(items) = l.reply(1, 71_000) else {
            panic!()
        };
        assert_eq!(items.len(), 1);
        for i in 0..200 {
            l.add(Reason::Auth, format!("{i}"), "x".into(), String::new(), 0);
        }
        assert_eq!(l.len(), MAX_LEN);
        l.reset();
        assert!(l.is_empty());
    }
}
