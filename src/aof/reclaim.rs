//! How much of the AOF a rewrite would reclaim, estimated from the records
//! appended since the file was last written whole (docs/PERSISTENCE.md,
//! "Rewrite").
//!
//! Disque rewrites automatically once the file has grown by
//! `auto-aof-rewrite-percentage` over its size after the last rewrite,
//! whether or not the growth is dead. While a backlog builds up (consumers
//! down, a spilled queue filling) every record is still live, so each of
//! those rewrites re-encodes and re-writes every queued job to produce a
//! file about as large as the one it replaces: a growth to N jobs rewrites
//! about 2N jobs' records for nothing. `auto-aof-rewrite-min-reclaim`
//! (opt-in) lets an automatic rewrite start only when this estimate says it
//! would drop at least that share of the file.
//!
//! The estimate counts dead bytes without reading the file: a DELJOB ends
//! its job's LOADJOB (both are dropped by a rewrite), a LOADJOB written
//! again for a job (`Engine::aof_relogs`) ends the earlier one, and the
//! extension records (DEDUP keys, schedules, batches) are counted as
//! reclaimable, which errs towards Disque's schedule. A LOADJOB's size is
//! the mean of those appended. After a load, the records that did not
//! leave a job behind are the dead share of the loaded file.

use super::file::record_len;
use crate::engine::AofRecord;

/// The running estimate of the dead bytes in the current file.
#[derive(Debug, Default, Clone)]
pub struct Reclaim {
    /// Bytes of records in the current file a rewrite would drop.
    dead: u64,
    /// `dead` when the rewrite in progress began: what the new file will
    /// not contain (records appended since are written to both files).
    at_begin: Option<u64>,
    /// LOADJOB records seen and their bytes, for the mean record size.
    loadjobs: u64,
    loadjob_bytes: u64,
    /// `Engine::aof_relogs` as last seen.
    relogs_seen: u64,
}

impl Reclaim {
    /// A file just loaded: `records` records applied, of `size` bytes in
    /// all, leaving `jobs` jobs. Records beyond one per job are dead.
    pub fn after_load(size: u64, records: u64, jobs: u64, relogs_seen: u64) -> Reclaim {
        let dead = match records {
            0 => 0,
            r => size.saturating_mul(r.saturating_sub(jobs)) / r,
        };
        Reclaim {
            dead,
            at_begin: None,
            loadjobs: records,
            loadjob_bytes: size,
            relogs_seen,
        }
    }

    fn mean_loadjob(&self) -> u64 {
        self.loadjob_bytes.checked_div(self.loadjobs).unwrap_or(0)
    }

    /// Records just handed to the writer; `relogs` is the engine's
    /// cumulative count of LOADJOBs that superseded an earlier one.
    pub fn appended(&mut self, recs: &[AofRecord], relogs: u64) {
        let mut deljobs = 0u64;
        for r in recs {
            match r {
                AofRecord::LoadJob(_) => {
                    self.loadjobs += 1;
                    self.loadjob_bytes += record_len(r) as u64;
                }
                AofRecord::DelJob(_) => {
                    deljobs += 1;
                    self.dead += record_len(r) as u64;
                }
                AofRecord::Dedup(_) | AofRecord::Schedule(_) | AofRecord::Batch(_) => {
                    self.dead += record_len(r) as u64;
                }
            }
        }
        let superseded = relogs.saturating_sub(self.relogs_seen);
        self.relogs_seen = relogs;
        let mean = self.mean_loadjob();
        self.dead = self
            .dead
            .saturating_add(deljobs * mean)
            .saturating_add(superseded * mean);
    }

    /// A background rewrite started.
    pub fn rewrite_began(&mut self) {
        self.at_begin = Some(self.dead);
    }

    /// The rewrite in progress ended; `adopted`: its file replaced the AOF.
    pub fn rewrite_ended(&mut self, adopted: bool) {
        if let (Some(before), true) = (self.at_begin, adopted) {
            self.dead = self.dead.saturating_sub(before);
        }
        self.at_begin = None;
    }

    /// A synchronous rewrite replaced the file: nothing in it is dead.
    pub fn rewritten(&mut self) {
        self.dead = 0;
        self.at_begin = None;
    }

    /// Estimated bytes a rewrite would drop.
    pub fn dead(&self) -> u64 {
        self.dead
    }

    /// Whether a rewrite of a `size`-byte file would reclaim at least
    /// `min_pct` percent of it (always true for 0, Disque's rule).
    pub fn worth_rewriting(&self, size: u64, min_pct: u64) -> bool {
        min_pct == 0 || u128::from(self.dead) * 100 >= u128::from(size) * u128::from(min_pct)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic
mod tests {
    use super::*;
    use crate::domain::job::JobId;
    use bytes::Bytes;

    fn load(n: usize) -> AofRecord {
        AofRecord::LoadJob(Bytes::from(vec![0u8; n]))
    }

    fn del() -> AofRecord {
        AofRecord::DelJob(
            JobId::parse(b"D-ad249f8c-OF1sLDglZX7WluoLS7rcXAGl-003d").expect("valid id"),
        )
    }

    #[test]
    fn a_growing_backlog_is_not_worth_rewriting() {
        let mut r = Reclaim::default();
        for _ in 0..1000 {
            r.appended(&[load(200)], 0);
        }
        assert_eq!(r.dead(), 0);
        assert!(!r.worth_rewriting(1000 * 232, 50));
        assert!(r.worth_rewriting(1000 * 232, 0), "0 keeps Disque's rule");
    }

    #[test]
    fn acked_jobs_make_their_records_dead() {
        let mut r = Reclaim::default();
        // 1,000 jobs added and 1,000 acked: everything but the DELJOBs'
        // own 63 bytes and the LOADJOBs is dead, i.e. the whole file.
        for _ in 0..1000 {
            r.appended(&[load(200), del()], 0);
        }
        let size = 1000 * (232 + 63);
        assert_eq!(r.dead(), size);
        assert!(r.worth_rewriting(size, 50));
        assert!(r.worth_rewriting(size, 100));
        // Half of them acked: (232 + 63) of every (2 * 232 + 63) bytes.
        let mut r = Reclaim::default();
        for _ in 0..1000 {
            r.appended(&[load(200), load(200), del()], 0);
        }
        let size = 1000 * (2 * 232 + 63);
        assert_eq!(r.dead(), 1000 * (232 + 63));
        assert!(r.worth_rewriting(size, 50));
        assert!(!r.worth_rewriting(size, 60));
    }

    #[test]
    fn relogged_jobs_and_extension_records_count_as_dead() {
        let mut r = Reclaim::default();
        r.appended(&[load(200)], 0);
        r.appended(&[load(200)], 1);
        assert_eq!(r.dead(), 232);
        r.appended(&[AofRecord::Dedup(Bytes::from(vec![0u8; 18]))], 1);
        assert_eq!(r.dead(), 232 + 50);
    }

    #[test]
    fn a_rewrite_keeps_only_what_died_while_it_ran() {
        let mut r = Reclaim::default();
        r.appended(&[load(200), del()], 0);
        let before = r.dead();
        r.rewrite_began();
        r.appended(&[load(200), del()], 0);
        r.rewrite_ended(true);
        assert_eq!(r.dead(), 295);
        assert!(before > 0);
        // A failed rewrite leaves the file, and its dead bytes, as they were.
        r.rewrite_began();
        r.appended(&[load(200), del()], 0);
        r.rewrite_ended(false);
        assert_eq!(r.dead(), 2 * 295);
        r.rewritten();
        assert_eq!(r.dead(), 0);
    }

    #[test]
    fn a_loaded_file_counts_records_that_left_no_job() {
        // 100 records of 10 bytes, 25 jobs left: 75 % dead.
        let r = Reclaim::after_load(1000, 100, 25, 7);
        assert_eq!(r.dead(), 750);
        assert!(r.worth_rewriting(1000, 75));
        assert!(!r.worth_rewriting(1000, 76));
        assert_eq!(Reclaim::after_load(0, 0, 0, 0).dead(), 0);
        // More jobs than records (jobs registered otherwise): nothing dead.
        assert_eq!(Reclaim::after_load(1000, 10, 20, 0).dead(), 0);
    }
}
