//! Replaying an AOF into the engine (docs/PERSISTENCE.md), through the same engine
//! entry points the rest of the node uses (`job_from_record`, `register`,
//! `enqueue`, `update_awake`, `delete_job`).

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use std::sync::Arc;

use super::reader::{AofReader, ReadError, Record};
use super::{AofError, RecordError};
use crate::domain::job::JobState;
use crate::engine::records::Flavor;
use crate::engine::Engine;
use crate::protocol::job_codec::JobRecord;

#[derive(Clone, Copy, Debug)]
pub struct LoadOptions {
    /// `aof-load-truncated`: accept (and cut off) a truncated last record.
    pub truncated_ok: bool,
    /// `aof-enqueue-jobs-once`: put jobs that were queued back in their queue.
    pub enqueue: bool,
}

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Loaded {
    /// Jobs present after the load.
    pub jobs: usize,
    /// Records applied.
    pub records: u64,
    /// File size after a possible truncation.
    pub size: u64,
    /// Offset the file was cut at, if its tail was truncated.
    pub truncated_at: Option<u64>,
}

/// Load `path` into `engine`. A missing file is an empty one. The caller
/// keeps `engine.aof` off so replaying produces no new records.
pub fn load_file(
    engine: &mut Engine,
    path: &Path,
    opts: LoadOptions,
    now: u64,
) -> Result<Loaded, AofError> {
    let Some(mut load) = FileLoad::open(path, opts)? else {
        return Ok(Loaded::default());
    };
    while !load.step(engine, now, usize::MAX)? {}
    Ok(load.finish(engine))
}

/// A load in progress, applied in steps so the shell can serve other
/// work between them and answer `-LOADING` meanwhile.
pub struct FileLoad {
    reader: AofReader<File>,
    path: PathBuf,
    opts: LoadOptions,
    loaded: Loaded,
    /// File size when the load started (INFO loading_total_bytes).
    pub total_bytes: u64,
}

impl FileLoad {
    /// Open `path`; `None` when it does not exist (an empty AOF).
    pub fn open(path: &Path, opts: LoadOptions) -> Result<Option<FileLoad>, AofError> {
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(AofError::OpenRead {
                    path: path.to_path_buf(),
                    source: Arc::new(e),
                })
            }
        };
        let total_bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(Some(FileLoad {
            reader: AofReader::new(file),
            path: path.to_path_buf(),
            opts,
            loaded: Loaded::default(),
            total_bytes,
        }))
    }

    /// Bytes consumed so far (INFO loading_loaded_bytes).
    pub fn offset(&self) -> u64 {
        self.reader.offset()
    }

    /// Apply up to `max` records; true when the file is done.
    pub fn step(&mut self, engine: &mut Engine, now: u64, max: usize) -> Result<bool, AofError> {
        let path = self.path.as_path();
        let name = path.display();
        let opts = self.opts;
        for _ in 0..max {
            match self.reader.next_record() {
                Ok(Some((offset, rec))) => {
                    apply(engine, rec, opts, now).map_err(|source| AofError::BadRecord {
                        path: path.to_path_buf(),
                        offset,
                        source,
                    })?;
                    self.loaded.records += 1;
                }
                Ok(None) => return Ok(true),
                Err(ReadError::Truncated { offset }) if opts.truncated_ok => {
                    tracing::warn!(
                        "!!! Warning: short read while loading the AOF file {name}: the last \
                         record starting at offset {offset} is truncated. Truncating the AOF \
                         at offset {offset} (aof-load-truncated is enabled)."
                    );
                    OpenOptions::new()
                        .write(true)
                        .open(path)
                        .and_then(|f| f.set_len(offset).and_then(|()| f.sync_all()))
                        .map_err(|e| AofError::Truncate {
                            path: path.to_path_buf(),
                            offset,
                            source: Arc::new(e),
                        })?;
                    self.loaded.truncated_at = Some(offset);
                    return Ok(true);
                }
                Err(ReadError::Truncated { offset }) => {
                    return Err(AofError::Truncated {
                        path: path.to_path_buf(),
                        offset,
                    })
                }
                Err(ReadError::Corrupt { offset, why }) => {
                    return Err(AofError::Corrupt {
                        path: path.to_path_buf(),
                        offset,
                        why,
                    })
                }
                Err(ReadError::Version { offset, found }) => {
                    return Err(AofError::Version {
                        path: path.to_path_buf(),
                        offset,
                        found,
                        supported: super::reader::AOF_FORMAT_VERSION,
                    })
                }
                Err(ReadError::Io(e)) => {
                    return Err(AofError::Read {
                        path: path.to_path_buf(),
                        source: e,
                    })
                }
            }
        }
        Ok(false)
    }

    /// What was loaded (after the last `step` returned true).
    pub fn finish(mut self, engine: &Engine) -> Loaded {
        self.loaded.size = self.reader.offset();
        self.loaded.jobs = engine.registered_jobs();
        self.loaded
    }
}

/// Apply one record. Errors are content problems the reader cannot see.
pub fn apply(
    engine: &mut Engine,
    rec: Record,
    opts: LoadOptions,
    now: u64,
) -> Result<(), RecordError> {
    match rec {
        Record::LoadJob(blob) => {
            let (r, _) = JobRecord::decode_bytes(&blob)?;
            let Some(mut job) = engine.job_from_record(&r, Flavor::Storage, now) else {
                return Err(RecordError::BadJob);
            };
            if u64::from(job.etime) <= now / 1000 {
                return Ok(()); // expired while the node was down
            }
            if let Some(h) = engine.lookup(&job.id) {
                // Duplicate (e.g. rewrite snapshot + captured record, or a
                // JOBPRIORITY change): the later record's level wins.
                let ext = crate::engine::records::ext_of_record(&r);
                engine.load_priority(h, ext.as_ref().map_or(0, |x| x.priority));
                let done = ext.is_some_and(|x| x.after_done);
                engine.after_loaded_done(h, done, now);
                return Ok(());
            }
            let ext = crate::engine::records::ext_of_record(&r);
            if engine.replayed_cold(&job.id) {
                // A duplicate whose first copy already left RAM whole. A
                // job on disk carries no options; a later record that does
                // (JOBPRIORITY during a rewrite) replaces that copy.
                if ext.is_none() {
                    return Ok(());
                }
                engine.drop_replayed_cold(&job.id);
            }
            let was_queued = job.state == JobState::Queued;
            // Nobody waits for replication of a job loaded from disk, and a
            // queued job is only put back in a queue on request.
            if matches!(job.state, JobState::Queued | JobState::WaitRepl) {
                job.state = JobState::Active;
            }
            let requeue = was_queued && opts.enqueue;
            if requeue && job.qtime == 0 {
                // RETRY 0 jobs deserialize with qtime 0, which the enqueue
                // procedure refuses; C Disque leaves them active forever
                // (a quirk). Our documented choice (docs/COMPATIBILITY.md): give them a
                // qtime so the controlled-restart recipe re-queues them too.
                job.qtime = now.max(1);
            }
            let Some(h) = engine.register_with(job, ext) else {
                return Ok(());
            };
            engine.dedup_learn_from_job(h, now);
            if requeue {
                engine.enqueue(h, false, now);
            }
            engine.update_awake(h, now);
            if !requeue {
                engine.spill_parked(h, now);
            }
        }
        Record::DelJob(id) => {
            if let Some(h) = engine.lookup(&id) {
                engine.delete_job(h, now);
            } else {
                engine.drop_replayed_cold(&id);
            }
        }
        Record::Dedup(payload) => {
            if !engine.dedup_load(&payload, now) {
                return Err(RecordError::BadDedup);
            }
        }
        // The reader already refused a version newer than this build's.
        Record::Version(_) => {}
        Record::Batch(payload) => {
            if !engine.batch_load(&payload) {
                return Err(RecordError::BadBatch);
            }
        }
        Record::Schedule(payload) => {
            if !engine.schedule_load(&payload, now) {
                return Err(RecordError::BadSchedule);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic
mod tests {
    use super::*;
    use crate::domain::job::JobId;
    use crate::engine::records::record_of;
    use crate::engine::AofRecord;
    use crate::support::temp_dir::TempDir;

    const NOW: u64 = 1_700_000_000_000;

    fn engine() -> Engine {
        Engine::new([b'a'; 40], 7711, 1, NOW)
    }

    fn job_blob(e: &Engine, n: u8, state: JobState, retry: u32, etime: u32) -> bytes::Bytes {
        let mut id = *b"D-ad249f8c-OF1sLDglZX7WluoLS7rcXAGl-003d";
        id[39] = b'0' + n;
        let mut j = Engine::new_job(JobId(id));
        j.state = state;
        j.retry = retry;
        j.etime = etime;
        j.ctime = u64::from(n);
        j.queue = Some(crate::domain::job::QueueName::from(&b"q"[..]));
        j.body = Some(crate::domain::job::Body::from(&[b'x'; 10][..]));
        record_of(&j, None, e.cluster(), Flavor::Storage, 0).to_bytes()
    }

    fn file_of(recs: &[AofRecord]) -> Vec<u8> {
        let mut v = Vec::new();
        for r in recs {
            super::super::reader::encode_record(r, &mut v);
        }
        v
    }

    /// A test's AOF file, in a directory removed when the test drops it.
    fn write(name: &str, data: &[u8]) -> (TempDir, PathBuf) {
        let dir = TempDir::new("load");
        let p = dir.path().join(format!("{name}.aof"));
        std::fs::write(&p, data).unwrap();
        (dir, p)
    }

    /// The spill thread's answers to the writes the engine asked for.
    fn writes_done(e: &mut Engine) -> Vec<crate::engine::spill::SpillDone> {
        use crate::engine::spill::{SpillDone, SpillOp};
        e.take_spill_ops()
            .into_iter()
            .filter_map(|op| match op {
                SpillOp::Write { loc, .. } => Some(SpillDone::Written {
                    seg: loc.seg,
                    end: loc.off + loc.record_len() as u32,
                }),
                _ => None,
            })
            .collect()
    }

    /// The spill thread's part: every write lands.
    fn writes_land(e: &mut Engine) {
        loop {
            let done = writes_done(e);
            if done.is_empty() {
                return;
            }
            e.spill_done(done, NOW);
        }
    }

    #[test]
    fn a_second_record_of_a_job_replayed_whole_to_disk_is_not_queued_again() {
        let blobs = plain_blobs(&engine());
        let (mut e, opts) = replayed_whole(&blobs);
        // A rewrite may list a job twice (an ADDJOB's record made while it
        // ran, and the snapshot's); by the second, the first copy left RAM.
        replay_again(&mut e, &blobs, opts);
        e.set_spill_replay(false);
        assert_eq!(e.queue_len(b"q"), 400);
    }

    #[test]
    fn a_later_record_with_a_priority_replaces_a_copy_replayed_whole() {
        let mut e0 = engine();
        let blobs = plain_blobs(&e0);
        let (mut e, opts) = replayed_whole(&blobs);
        // JOBPRIORITY during a rewrite logs each job again, with its level.
        let ext = crate::domain::job_ext::JobExt {
            priority: 9,
            ..Default::default()
        };
        for (_, b) in &blobs {
            let (r, _) = JobRecord::decode_bytes(b).unwrap();
            let j = e0.job_from_record(&r, Flavor::Storage, NOW).unwrap();
            let again = record_of(&j, Some(&ext), e0.cluster(), Flavor::Storage, 0).to_bytes();
            apply(&mut e, Record::LoadJob(again), opts, NOW).unwrap();
        }
        e.set_spill_replay(false);
        assert_eq!(e.queue_len(b"q"), 400, "each job queued once");
        assert_eq!(e.cold_jobs(), 0);
        for (id, _) in &blobs {
            let h = e.lookup(id).expect("the later record's job");
            assert_eq!(e.priority_of(h), Some(9));
        }
    }

    /// 400 plain queued jobs' storage records, IDs numbered from 0.
    fn plain_blobs(e0: &Engine) -> Vec<(JobId, bytes::Bytes)> {
        let far = (NOW / 1000 + 3600) as u32;
        (0..400u32)
            .map(|n| {
                let mut id = *b"D-ad249f8c-OF1sLDglZX7WluoLS7rcXAGl-003d";
                id[28..34].copy_from_slice(format!("{n:06}").as_bytes());
                let id = JobId(id);
                let mut j = Engine::new_job(id);
                j.state = JobState::Queued;
                j.retry = 30;
                j.etime = far;
                j.ctime = u64::from(n) + 1;
                j.queue = Some(crate::domain::job::QueueName::from(&b"q"[..]));
                j.body = Some(crate::domain::job::Body::from(&[b'x'; 10][..]));
                (
                    id,
                    record_of(&j, None, e0.cluster(), Flavor::Storage, 0).to_bytes(),
                )
            })
            .collect()
    }

    /// An engine replaying with whole jobs on disk from the first job on,
    /// once these records are applied and their writes have landed: most
    /// of the jobs left RAM.
    fn replayed_whole(blobs: &[(JobId, bytes::Bytes)]) -> (Engine, LoadOptions) {
        let mut e = engine();
        e.set_spill(true, 0, 0);
        e.set_spill_whole_jobs(true);
        e.set_spill_replay(true);
        let opts = LoadOptions {
            truncated_ok: false,
            enqueue: true,
        };
        replay_again(&mut e, blobs, opts);
        (e, opts)
    }

    fn replay_again(e: &mut Engine, blobs: &[(JobId, bytes::Bytes)], opts: LoadOptions) {
        for (_, b) in blobs {
            apply(e, Record::LoadJob(b.clone()), opts, NOW).unwrap();
        }
        writes_land(e);
        assert!(e.cold_jobs() > 200, "{} jobs whole on disk", e.cold_jobs());
    }

    #[test]
    fn a_deljob_record_deletes_a_job_replayed_whole_to_disk() {
        let blobs = plain_blobs(&engine());
        let (mut e, opts) = replayed_whole(&blobs);
        // Acknowledged after their ADDJOB, before the next rewrite: the
        // file holds each job's LOADJOB, then its DELJOB.
        for (id, _) in &blobs {
            apply(&mut e, Record::DelJob(*id), opts, NOW).unwrap();
        }
        e.set_spill_replay(false);
        assert_eq!(e.queue_len(b"q"), 0, "acknowledged jobs came back");
        assert_eq!(e.cold_jobs(), 0);
    }

    #[test]
    fn queued_jobs_come_back_active_or_queued_once() {
        let e0 = engine();
        let far = (NOW / 1000 + 3600) as u32;
        let recs = vec![
            AofRecord::LoadJob(job_blob(&e0, 1, JobState::Queued, 30, far)),
            AofRecord::LoadJob(job_blob(&e0, 2, JobState::Queued, 0, far)),
            AofRecord::LoadJob(job_blob(&e0, 3, JobState::Active, 30, far)),
            AofRecord::LoadJob(job_blob(&e0, 4, JobState::Queued, 30, (NOW / 1000) as u32)),
            AofRecord::LoadJob(job_blob(&e0, 3, JobState::Active, 30, far)),
        ];
        let (_dir, path) = write("q", &file_of(&recs));
        for enqueue in [false, true] {
            let mut e = engine();
            let opts = LoadOptions {
                truncated_ok: false,
                enqueue,
            };
            let l = load_file(&mut e, &path, opts, NOW).unwrap();
            assert_eq!(l.records, 5);
            assert_eq!(l.jobs, 3, "expired job skipped, duplicate ignored");
            let want = if enqueue { 2 } else { 0 };
            assert_eq!(e.queue_len(b"q"), want, "retry-0 job re-queued too");
        }
    }

    /// Three queued jobs loaded from an AOF (without the recipe: they
    /// come back active) into an engine spilling from the first job on;
    /// the confirmations of the body writes the load produced, not yet
    /// applied.
    fn load_three_spilling(name: &str) -> (Engine, Vec<crate::engine::spill::SpillDone>) {
        let e0 = engine();
        let far = (NOW / 1000 + 3600) as u32;
        let recs: Vec<AofRecord> = (1..=3)
            .map(|n| AofRecord::LoadJob(job_blob(&e0, n, JobState::Queued, 30, far)))
            .collect();
        let (_dir, path) = write(name, &file_of(&recs));
        let mut e = engine();
        // Watermark 0: spilling from the first job on.
        e.set_spill(true, 0, 0);
        let opts = LoadOptions {
            truncated_ok: false,
            enqueue: false,
        };
        let l = load_file(&mut e, &path, opts, NOW).unwrap();
        assert_eq!(l.jobs, 3);
        let done = writes_done(&mut e);
        assert_eq!(done.len(), 3, "every active job's body is written");
        (e, done)
    }

    #[test]
    fn jobs_loaded_active_spill_their_bodies_until_requeued() {
        let (mut e, done) = load_three_spilling("spill");
        e.spill_done(done, NOW);
        assert_eq!(e.spill_stats().jobs, 3);
        for (h, j) in e.store().iter_from(0) {
            assert_eq!(j.state, JobState::Active);
            assert!(j.body.is_none(), "the body left RAM");
            assert!(e.spilled_body(h).is_some());
        }
        // Their retry queues them with the body still on disk.
        let hs: Vec<u32> = e.store().iter_from(0).map(|(h, _)| h).collect();
        for h in hs {
            assert!(e.enqueue(h, false, NOW));
        }
        assert_eq!(e.queue_len(b"q"), 3);
        assert_eq!(e.spill_stats().jobs, 3);
    }

    #[test]
    fn a_loaded_job_queued_or_delivered_before_its_write_lands_keeps_its_body() {
        use crate::engine::getjob::{GetJobOutcome, GetJobRequest};
        let (mut e, done) = load_three_spilling("spill-race");
        // Before the writes land, the retries of the first two fire and a
        // consumer takes one of them.
        let hs: Vec<u32> = e.store().iter_from(0).map(|(h, _)| h).collect();
        assert!(e.enqueue(hs[0], false, NOW + 1));
        assert!(e.enqueue(hs[1], false, NOW + 1));
        let req = GetJobRequest {
            nohang: true,
            timeout: 0,
            count: 1,
            withcounters: false,
            queues: vec![bytes::Bytes::from_static(b"q")],
        };
        let GetJobOutcome::Jobs(got) = e.getjob(1, req, NOW + 2) else {
            panic!("GETJOB found no job");
        };
        assert_eq!(got.len(), 1);
        e.spill_done(done, NOW + 3);
        let mut in_ram = 0;
        for (_, j) in e.store().iter_from(0) {
            match j.state {
                // Queued at the head or delivered: bodies stay in RAM.
                JobState::Queued | JobState::Active if j.qtime != 0 && j.body.is_some() => {
                    in_ram += 1
                }
                _ => assert!(
                    j.body.is_none(),
                    "{:?} still waiting for its retry",
                    j.state
                ),
            }
        }
        assert_eq!(
            in_ram, 2,
            "the requeued and the delivered job keep their bodies"
        );
        assert_eq!(e.spill_stats().jobs, 1);
    }

    #[test]
    fn deljob_removes_and_truncation_rules() {
        let e0 = engine();
        let far = (NOW / 1000 + 3600) as u32;
        let blob = job_blob(&e0, 1, JobState::Active, 30, far);
        let id = crate::domain::job::JobId(blob[4..44].try_into().unwrap());
        let mut data = file_of(&[
            AofRecord::LoadJob(blob),
            AofRecord::DelJob(id),
            AofRecord::LoadJob(job_blob(&e0, 2, JobState::Active, 30, far)),
        ]);
        let full = data.len() as u64;
        data.extend_from_slice(b"*2\r\n$6\r\nDEL");
        let (_dir, path) = write("t", &data);
        let strict = LoadOptions {
            truncated_ok: false,
            enqueue: false,
        };
        let err = load_file(&mut engine(), &path, strict, NOW).unwrap_err();
        assert_eq!(err.offset(), Some(full), "{err}");
        assert!(err.to_string().contains(&format!("offset {full}")), "{err}");
        let mut e = engine();
        let l = load_file(
            &mut e,
            &path,
            LoadOptions {
                truncated_ok: true,
                enqueue: false,
            },
            NOW,
        )
        .unwrap();
        assert_eq!((l.jobs, l.truncated_at), (1, Some(full)));
        assert!(e.lookup(&id).is_none());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), full);
    }
}
