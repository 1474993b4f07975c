//! The spill thread: performs the engine's spill decisions
//! (`engine::spill::SpillOp`: append records, read bodies back, copy
//! records forward, unlink dead segments) on segment files in `spill-dir`,
//! and reports each result (`SpillDone`) through a sink the server wires
//! back to the node's owner. It also reads bodies for replies that show
//! a spilled job without bringing it back into RAM (SHOW, QPEEK, JSCAN).
//!
//! All file I/O of the spill tier happens here, on one OS thread, never
//! on the owner (which holds the engine) nor on a runtime worker. Files
//! are written with positional writes at the offsets the engine chose and
//! never fsynced: they are a cache of what the AOF (or the replicas) hold,
//! and a restart deletes them (`segment::wipe`).

pub mod segment;

use std::collections::{HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use crate::domain::job::JobId;
use crate::engine::spill::{Loc, ReadFailure, SpillDone, SpillFault, SpillOp};
pub use segment::SegmentError;

/// How long the thread waits after a wake-up for more ops to arrive.
const GATHER: Duration = Duration::from_micros(200);

/// Ops performed between two looks at the channel: a read asked for
/// while a long run of writes, copies or other reads is queued waits for
/// one slice at most (measured with `scripts/spill_perf.sh coldmiss`).
const SLICE: usize = 256;

/// Reads reported at a time: a head window's worth, so the consumer of a
/// queue whose prefetch asked for four windows gets the first one first.
const READ_SLICE: usize = 128;

/// Largest stretch of adjacent whole-job records read with one call.
const READ_SPAN: u64 = 1 << 20;

/// How often the spill thread hands freed heap pages back (at most).
const TRIM_EVERY: Duration = Duration::from_secs(1);

/// Where the spill thread's results go (the server submits them to the
/// owner as one task).
pub type Sink = Box<dyn Fn(Vec<SpillDone>) + Send>;

/// Called on the spill thread with the bodies a reply asked for, in order.
pub type BodiesDone = Box<dyn FnOnce(Vec<Result<Bytes, ReadFailure>>) + Send>;

/// Called on the spill thread with whole records (ID and storage record)
/// a reply asked for, in order.
pub type RecordsDone = Box<dyn FnOnce(Vec<Result<(JobId, Bytes), ReadFailure>>) + Send>;

enum Req {
    Ops(Vec<SpillOp>),
    Bodies {
        wants: Vec<(JobId, Loc)>,
        done: BodiesDone,
    },
    Records {
        wants: Vec<Loc>,
        done: RecordsDone,
    },
}

/// Counters kept by the spill thread (INFO spill, /metrics).
#[derive(Default, Debug)]
pub struct IoStats {
    pub writes: AtomicU64,
    pub write_bytes: AtomicU64,
    /// Bodies read for replies (SHOW, QPEEK, JSCAN), not paged in.
    pub reply_reads: AtomicU64,
    /// Records that failed their checks, on any path.
    pub corrupt: AtomicU64,
    pub io_errors: AtomicU64,
    /// The last error, for INFO.
    pub last_error: Mutex<Option<String>>,
}

impl IoStats {
    fn error(&self, e: &SegmentError) {
        if e.is_corrupt() {
            self.corrupt.fetch_add(1, Ordering::Relaxed);
        } else {
            self.io_errors.fetch_add(1, Ordering::Relaxed);
        }
        tracing::warn!(error = %e, "Spill I/O failed.");
        if let Ok(mut last) = self.last_error.lock() {
            *last = Some(e.to_string());
        }
    }
}

/// The handle the node keeps: a channel to the thread (unbounded: the
/// engine caps writes in flight, and reads are bounded by the head
/// windows and the replies waiting for them).
pub struct SpillIo {
    tx: mpsc::Sender<Req>,
    pub stats: Arc<IoStats>,
    dir: PathBuf,
}

impl SpillIo {
    /// Empty `dir` of old segments and start the thread.
    pub fn start(dir: PathBuf, sink: Sink) -> Result<SpillIo, SegmentError> {
        let removed = segment::wipe(&dir)?;
        if removed > 0 {
            tracing::info!(
                dir = %dir.display(),
                removed,
                "Deleted old spill segments (a cache of the previous run)."
            );
        }
        let (tx, rx) = mpsc::channel();
        let stats = Arc::new(IoStats::default());
        let thread_stats = stats.clone();
        let thread_dir = dir.clone();
        std::thread::Builder::new()
            .name("spill-io".into())
            .spawn(move || run(&thread_dir, &rx, &sink, &thread_stats))
            .map_err(|source| SegmentError::Dir {
                path: dir.clone(),
                source,
            })?;
        Ok(SpillIo { tx, stats, dir })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Hand the engine's ops to the thread (non-blocking).
    pub fn submit(&self, ops: Vec<SpillOp>) {
        if !ops.is_empty() {
            // A gone thread (only at exit) drops them: the jobs keep their
            // bodies until the writes are confirmed, so nothing is lost.
            let _ = self.tx.send(Req::Ops(ops));
        }
    }

    /// Read bodies for a reply; `done` runs on the spill thread (or at
    /// once with errors if it is gone).
    pub fn read_bodies(&self, wants: Vec<(JobId, Loc)>, done: BodiesDone) {
        if let Err(mpsc::SendError(Req::Bodies { wants, done })) =
            self.tx.send(Req::Bodies { wants, done })
        {
            done(wants.iter().map(|_| Err(ReadFailure::Io)).collect());
        }
    }
}

impl SpillIo {
    /// Read whole jobs' records for a reply (JSCAN over jobs stored
    /// whole); `done` runs on the spill thread (or at once with errors if
    /// it is gone).
    pub fn read_records(&self, wants: Vec<Loc>, done: RecordsDone) {
        if let Err(mpsc::SendError(Req::Records { wants, done })) =
            self.tx.send(Req::Records { wants, done })
        {
            done(wants.iter().map(|_| Err(ReadFailure::Io)).collect());
        }
    }
}

/// Open segment files by number.
struct Files<'a> {
    dir: &'a Path,
    open: HashMap<u32, File>,
    /// Kept from one span read to the next.
    span: Vec<u8>,
}

impl Files<'_> {
    fn get(&mut self, seg: u32, create: bool) -> Result<&File, SegmentError> {
        if !self.open.contains_key(&seg) {
            let p = segment::path(self.dir, seg);
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create(create)
                .truncate(false)
                .open(&p)
                .map_err(|source| SegmentError::Open { path: p, source })?;
            self.open.insert(seg, f);
        }
        self.open.get(&seg).ok_or_else(|| SegmentError::Open {
            path: segment::path(self.dir, seg),
            source: std::io::ErrorKind::NotFound.into(),
        })
    }

    fn write(&mut self, seg: u32, off: u32, buf: &[u8]) -> Result<(), SegmentError> {
        crate::os::faults::before_write();
        let f = self.get(seg, true)?;
        f.write_all_at(buf, u64::from(off))
            .map_err(|source| SegmentError::Write {
                path: segment::path(self.dir, seg),
                off: u64::from(off),
                source,
            })
    }

    fn read(&mut self, id: &JobId, loc: Loc) -> Result<Bytes, SegmentError> {
        let p = segment::path(self.dir, loc.seg);
        let f = self.get(loc.seg, false)?;
        segment::read(f, &p, id, loc)
    }

    fn read_any(&mut self, loc: Loc) -> Result<(JobId, Bytes), SegmentError> {
        let p = segment::path(self.dir, loc.seg);
        let f = self.get(loc.seg, false)?;
        segment::read_any(f, &p, loc)
    }

    /// Whole records at consecutive places of one segment, read with one
    /// call and checked one by one (each on its own if that read fails).
    fn read_many(&mut self, locs: &[Loc]) -> Vec<Result<(JobId, Bytes), SegmentError>> {
        let (Some(first), Some(last)) = (locs.first(), locs.last()) else {
            return Vec::new();
        };
        let p = segment::path(self.dir, first.seg);
        let end = u64::from(last.off) + last.record_len();
        let len = end.saturating_sub(u64::from(first.off)) as usize;
        let mut buf = std::mem::take(&mut self.span);
        let got = self
            .get(first.seg, false)
            .and_then(|f| segment::read_span_into(f, &p, first.off, len, &mut buf));
        let Ok(got) = got else {
            self.span = buf;
            return locs.iter().map(|loc| self.read_any(*loc)).collect();
        };
        let span = buf.get(..got).unwrap_or_default();
        // The payloads go out as slices of one buffer: one allocation here
        // per span instead of one per record, and one free on the owner
        // once it has decoded them all (per-record frees there took this
        // thread's malloc arena lock, which its next allocation wanted).
        // Checked records' payloads are copied into `all` and their
        // places kept; then each becomes a slice of the frozen buffer.
        let mut all = BytesMut::with_capacity(span.len());
        let placed: Vec<Result<(JobId, std::ops::Range<usize>), SegmentError>> = locs
            .iter()
            .map(|loc| {
                let at = loc.off.saturating_sub(first.off) as usize;
                let rec = span
                    .get(at..at + loc.record_len() as usize)
                    .unwrap_or_default();
                let (id, payload) =
                    segment::check_any(rec, *loc).map_err(|what| SegmentError::Corrupt {
                        path: p.clone(),
                        off: u64::from(loc.off),
                        what,
                    })?;
                let from = all.len();
                all.extend_from_slice(payload);
                Ok((id, from..all.len()))
            })
            .collect();
        let all = all.freeze();
        let out = placed
            .into_iter()
            .map(|r| r.map(|(id, range)| (id, all.slice(range))))
            .collect();
        self.span = buf;
        out
    }
}

fn failure(e: &SegmentError) -> ReadFailure {
    if e.is_corrupt() {
        ReadFailure::Corrupt
    } else {
        ReadFailure::Io
    }
}

/// Ops taken from the channel and not performed yet.
#[derive(Default)]
struct Queued {
    /// Writes, copies and unlinks, in engine order.
    backlog: VecDeque<SpillOp>,
    /// Reads asked for since the last look at the channel.
    reads: Vec<SpillOp>,
    /// The engine's emptied op lists, to go back with the next results.
    lists: Vec<Vec<SpillOp>>,
}

impl Queued {
    /// Put the emptied op lists in with results going to the owner anyway
    /// (never a trip of their own unless many have piled up).
    fn hand_back(&mut self, done: &mut Vec<SpillDone>) {
        if !self.lists.is_empty() && (!done.is_empty() || self.lists.len() >= 64) {
            done.push(SpillDone::Spent {
                bodies: Vec::new(),
                lists: std::mem::take(&mut self.lists),
            });
        }
    }
}

fn run(dir: &Path, rx: &mpsc::Receiver<Req>, sink: &Sink, stats: &IoStats) {
    let mut files = Files {
        dir,
        open: HashMap::new(),
        span: Vec::new(),
    };
    // Appends gather here before each write; kept from burst to burst
    // (grown once, not from empty by doubling every burst).
    let mut wbuf = BytesMut::new();
    let mut trimmed = Instant::now();
    let mut queued = Queued::default();
    // Segments a write failed in: the engine abandons them, so the writes
    // to them still queued are skipped.
    let mut failed: Vec<u32> = Vec::new();
    loop {
        if queued.backlog.is_empty() {
            let Ok(req) = rx.recv() else {
                return;
            };
            // Let the ops of the next owner tasks join this burst: senders
            // meanwhile only queue (no wake-up of this thread each), and
            // the results go back as one owner task.
            std::thread::sleep(GATHER);
            take(req, &mut files, stats, &mut queued);
        }
        while let Ok(req) = rx.try_recv() {
            take(req, &mut files, stats, &mut queued);
        }
        // Reads first: a consumer (or a prefetch ahead of one) waits for
        // them, while nobody waits for a write but the memory it frees.
        // So a read asked for behind a long backfill or compaction waits
        // for one slice of it at most, not for all of it.
        let mut done = Vec::new();
        while !queued.reads.is_empty() {
            let n = queued.reads.len().min(READ_SLICE);
            let slice: Vec<SpillOp> = queued.reads.drain(..n).collect();
            apply(&mut files, slice, stats, &mut done, &mut wbuf, &mut failed);
            queued.hand_back(&mut done);
            sink(std::mem::take(&mut done));
        }
        let n = queued.backlog.len().min(SLICE);
        let slice: Vec<SpillOp> = queued.backlog.drain(..n).collect();
        apply(&mut files, slice, stats, &mut done, &mut wbuf, &mut failed);
        queued.hand_back(&mut done);
        if failed.len() > 64 {
            failed.drain(..failed.len() - 64);
        }
        if !done.is_empty() {
            sink(done);
            // The bodies these writes take out of RAM are freed all over the
            // heap; without a trim the allocator keeps their pages resident.
            if trimmed.elapsed() >= TRIM_EVERY {
                crate::os::sys::release_free_heap();
                trimmed = Instant::now();
            }
        }
    }
}

/// Sort one request: reads for a reply are served at once, the engine's
/// reads join `reads`, every other op joins the backlog in order.
fn take(req: Req, files: &mut Files, stats: &IoStats, queued: &mut Queued) {
    match req {
        Req::Ops(mut ops) => {
            for op in ops.drain(..) {
                // Reordering a read ahead of the writes queued before it
                // is safe: the engine only reads records whose write it
                // has seen confirmed, and never a segment it unlinked.
                if matches!(op, SpillOp::Read { .. } | SpillOp::ReadCold { .. }) {
                    queued.reads.push(op);
                } else {
                    queued.backlog.push_back(op);
                }
            }
            queued.lists.push(ops);
        }
        Req::Bodies { wants, done } => {
            let bodies = wants
                .iter()
                .map(|(id, loc)| {
                    stats.reply_reads.fetch_add(1, Ordering::Relaxed);
                    files.read(id, *loc).map_err(|e| {
                        stats.error(&e);
                        failure(&e)
                    })
                })
                .collect();
            done(bodies);
        }
        Req::Records { wants, done } => {
            let recs = wants
                .iter()
                .map(|loc| {
                    stats.reply_reads.fetch_add(1, Ordering::Relaxed);
                    files.read_any(*loc).map_err(|e| {
                        stats.error(&e);
                        failure(&e)
                    })
                })
                .collect();
            done(recs);
        }
    }
}

/// Perform ops in order; consecutive appends to one segment become one
/// write.
fn apply(
    files: &mut Files,
    ops: Vec<SpillOp>,
    stats: &IoStats,
    done: &mut Vec<SpillDone>,
    buf: &mut BytesMut,
    failed: &mut Vec<u32>,
) {
    buf.clear();
    // (segment, start offset, end offset) of the appends in `buf`.
    let mut run: Option<(u32, u32, u32)> = None;
    let flush = |files: &mut Files,
                 buf: &mut BytesMut,
                 run: &mut Option<(u32, u32, u32)>,
                 failed: &mut Vec<u32>,
                 done: &mut Vec<SpillDone>| {
        let Some((seg, start, end)) = run.take() else {
            return;
        };
        match files.write(seg, start, buf) {
            Ok(()) => {
                stats.writes.fetch_add(1, Ordering::Relaxed);
                stats
                    .write_bytes
                    .fetch_add(buf.len() as u64, Ordering::Relaxed);
                done.push(SpillDone::Written { seg, end });
            }
            Err(e) => {
                stats.error(&e);
                let fault = if e.is_disk_full() {
                    SpillFault::DiskFull
                } else {
                    SpillFault::WriteError
                };
                failed.push(seg);
                done.push(SpillDone::WriteFailed { seg, fault });
            }
        }
        buf.clear();
    };
    // Written bodies go back to the owner to be freed (`SpillDone::Spent`).
    let mut spent = Vec::new();
    let mut ops = ops.into_iter().peekable();
    while let Some(op) = ops.next() {
        match op {
            SpillOp::Write { loc, id, body } => {
                if failed.contains(&loc.seg) {
                    continue;
                }
                let rec_end = loc.off.saturating_add(loc.record_len() as u32);
                match run {
                    Some((seg, _, ref mut end)) if seg == loc.seg && *end == loc.off => {
                        *end = rec_end;
                    }
                    _ => {
                        flush(files, buf, &mut run, failed, done);
                        run = Some((loc.seg, loc.off, rec_end));
                    }
                }
                segment::encode(&id, &body, buf);
                spent.push(body);
                if buf.len() >= 1 << 20 {
                    flush(files, buf, &mut run, failed, done);
                }
            }
            SpillOp::Read { h, id, loc } => {
                flush(files, buf, &mut run, failed, done);
                let result = files.read(&id, loc).map_err(|e| {
                    stats.error(&e);
                    failure(&e)
                });
                done.push(SpillDone::Read { h, id, loc, result });
            }
            SpillOp::Move { h, id, from, to } => {
                flush(files, buf, &mut run, failed, done);
                let result = match files.read(&id, from) {
                    Ok(body) => {
                        let mut rec = BytesMut::new();
                        segment::encode(&id, &body, &mut rec);
                        match files.write(to.seg, to.off, &rec) {
                            Ok(()) => Ok(()),
                            Err(e) => {
                                stats.error(&e);
                                Err(ReadFailure::Io)
                            }
                        }
                    }
                    Err(e) => {
                        stats.error(&e);
                        Err(failure(&e))
                    }
                };
                done.push(SpillDone::Moved {
                    h,
                    id,
                    from,
                    to,
                    result,
                });
            }
            SpillOp::ReadCold {
                slot,
                loc,
                qh,
                run: r,
            } => {
                flush(files, buf, &mut run, failed, done);
                // A prefetch reads a run's records, mostly next to each
                // other on disk: one read for each stretch of them.
                let mut group = vec![(slot, loc, qh, r)];
                let mut bytes = loc.record_len();
                while let Some(SpillOp::ReadCold { loc: next, .. }) = ops.peek() {
                    let Some(&(_, prev, _, _)) = group.last() else {
                        break;
                    };
                    let adjacent = next.seg == prev.seg
                        && u64::from(next.off) == u64::from(prev.off) + prev.record_len();
                    if !adjacent || bytes + next.record_len() > READ_SPAN {
                        break;
                    }
                    bytes += next.record_len();
                    if let Some(SpillOp::ReadCold { slot, loc, qh, run }) = ops.next() {
                        group.push((slot, loc, qh, run));
                    }
                }
                let locs: Vec<Loc> = group.iter().map(|g| g.1).collect();
                let results = if locs.len() == 1 {
                    vec![files.read_any(loc)]
                } else {
                    files.read_many(&locs)
                };
                for ((slot, loc, qh, r), result) in group.into_iter().zip(results) {
                    let result = result.map_err(|e| {
                        stats.error(&e);
                        failure(&e)
                    });
                    done.push(SpillDone::ReadCold {
                        slot,
                        loc,
                        qh,
                        run: r,
                        result,
                    });
                }
            }
            SpillOp::MoveCold { slot, from, to } => {
                flush(files, buf, &mut run, failed, done);
                let result = match files.read_any(from) {
                    Ok((id, payload)) => {
                        let mut rec = BytesMut::new();
                        segment::encode(&id, &payload, &mut rec);
                        files.write(to.seg, to.off, &rec).map_err(|e| {
                            stats.error(&e);
                            ReadFailure::Io
                        })
                    }
                    Err(e) => {
                        stats.error(&e);
                        Err(failure(&e))
                    }
                };
                done.push(SpillDone::MovedCold {
                    slot,
                    from,
                    to,
                    result,
                });
            }
            SpillOp::Unlink { seg } => {
                flush(files, buf, &mut run, failed, done);
                files.open.remove(&seg);
                let p = segment::path(files.dir, seg);
                if let Err(e) = std::fs::remove_file(&p) {
                    if e.kind() != std::io::ErrorKind::NotFound {
                        tracing::warn!(path = %p.display(), error = %e, "Can't delete a spill segment.");
                    }
                }
            }
        }
    }
    flush(files, buf, &mut run, failed, done);
    if !spent.is_empty() {
        done.push(SpillDone::Spent {
            bodies: spent,
            lists: Vec::new(),
        });
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::segment::tests::TempDir;
    use super::*;

    fn id(n: u8) -> JobId {
        let mut s = *b"D-00000000-000000000000000000000000-0001";
        s[20] = b'a' + n;
        JobId(s)
    }

    /// The thread on `dir`, its results on the receiver.
    fn start(dir: &TempDir) -> (SpillIo, mpsc::Receiver<Vec<SpillDone>>) {
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let io = SpillIo::start(
            dir.path().to_path_buf(),
            Box::new(move |d| {
                let _ = tx.lock().map(|t| t.send(d));
            }),
        )
        .unwrap();
        (io, rx)
    }

    /// The next results, without the written bodies handed back
    /// (`spent` checks those).
    fn wait(rx: &mpsc::Receiver<Vec<SpillDone>>) -> Vec<SpillDone> {
        let mut done = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("spill thread answered");
        done.retain(|d| !matches!(d, SpillDone::Spent { .. }));
        done
    }

    #[test]
    fn written_bodies_go_back_to_be_freed_by_the_owner() {
        let dir = TempDir::new("spent");
        let (io, rx) = start(&dir);
        let loc = Loc {
            seg: 1,
            off: 0,
            len: 3,
        };
        let body = Bytes::from(b"one".to_vec());
        io.submit(vec![SpillOp::Write {
            loc,
            id: id(1),
            body: body.clone(),
        }]);
        let done = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("spill thread answered");
        let spent: Vec<&Bytes> = done
            .iter()
            .flat_map(|d| match d {
                SpillDone::Spent { bodies, .. } => bodies.iter().collect(),
                _ => Vec::new(),
            })
            .collect();
        assert_eq!(spent.len(), 1);
        // The very allocation the engine handed over, not a copy.
        assert_eq!(spent[0].as_ptr(), body.as_ptr());
    }

    #[test]
    fn adjacent_whole_records_are_read_together_and_checked_each() {
        let dir = TempDir::new("many");
        let (io, rx) = start(&dir);
        let mut locs = Vec::new();
        let mut off = 0u32;
        let mut writes = Vec::new();
        for n in 0..5u8 {
            let body = Bytes::from(vec![b'a' + n; 10 + n as usize]);
            let loc = Loc {
                seg: 1,
                off,
                len: body.len() as u32,
            };
            off += loc.record_len() as u32;
            locs.push(loc);
            writes.push(SpillOp::Write {
                loc,
                id: id(n + 1),
                body,
            });
        }
        io.submit(writes);
        let _ = wait(&rx);
        // Damage the third record's payload.
        let path = segment::path(dir.path(), 1);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[locs[2].off as usize + crate::engine::spill::RECORD_HEADER as usize] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let reads = locs
            .iter()
            .enumerate()
            .map(|(i, &loc)| SpillOp::ReadCold {
                slot: i as u32,
                loc,
                qh: 0,
                run: 0,
            })
            .collect();
        io.submit(reads);
        let done = wait(&rx);
        assert_eq!(done.len(), 5);
        for (i, d) in done.into_iter().enumerate() {
            let SpillDone::ReadCold { slot, result, .. } = d else {
                panic!("not a read: {d:?}");
            };
            assert_eq!(slot, i as u32);
            if i == 2 {
                assert_eq!(result, Err(ReadFailure::Corrupt));
            } else {
                let (rid, body) = result.expect("read");
                assert_eq!(rid, id(i as u8 + 1));
                assert_eq!(body, vec![b'a' + i as u8; 10 + i]);
            }
        }
    }

    #[test]
    fn writes_reads_moves_and_unlinks_through_the_thread() {
        let dir = TempDir::new("io");
        let (io, rx) = start(&dir);
        let a = Loc {
            seg: 1,
            off: 0,
            len: 3,
        };
        let b = Loc {
            seg: 1,
            off: a.record_len() as u32,
            len: 4,
        };
        io.submit(vec![
            SpillOp::Write {
                loc: a,
                id: id(1),
                body: Bytes::from_static(b"one"),
            },
            SpillOp::Write {
                loc: b,
                id: id(2),
                body: Bytes::from_static(b"four"),
            },
        ]);
        let end = (a.record_len() + b.record_len()) as u32;
        assert_eq!(wait(&rx), vec![SpillDone::Written { seg: 1, end }]);
        let to = Loc {
            seg: 2,
            off: 0,
            len: 4,
        };
        io.submit(vec![
            SpillOp::Read {
                h: 7,
                id: id(1),
                loc: a,
            },
            SpillOp::Read {
                h: 8,
                id: id(1),
                loc: b,
            },
            SpillOp::Move {
                h: 8,
                id: id(2),
                from: b,
                to,
            },
            SpillOp::Unlink { seg: 1 },
        ]);
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while got.len() < 3 && Instant::now() < deadline {
            got.extend(wait(&rx));
        }
        // The engine reads a moved record at its new place once the move
        // is confirmed.
        io.submit(vec![SpillOp::Read {
            h: 8,
            id: id(2),
            loc: to,
        }]);
        got.extend(wait(&rx));
        assert_eq!(
            got,
            vec![
                SpillDone::Read {
                    h: 7,
                    id: id(1),
                    loc: a,
                    result: Ok(Bytes::from_static(b"one"))
                },
                // Another job's record at that place: corrupt, not served.
                SpillDone::Read {
                    h: 8,
                    id: id(1),
                    loc: b,
                    result: Err(ReadFailure::Corrupt)
                },
                SpillDone::Moved {
                    h: 8,
                    id: id(2),
                    from: b,
                    to,
                    result: Ok(())
                },
                SpillDone::Read {
                    h: 8,
                    id: id(2),
                    loc: to,
                    result: Ok(Bytes::from_static(b"four"))
                },
            ]
        );
        assert!(!segment::path(dir.path(), 1).exists());
        assert_eq!(io.stats.corrupt.load(Ordering::Relaxed), 1);
        // Reply reads: a missing segment is an I/O failure.
        let (btx, brx) = mpsc::channel();
        io.read_bodies(
            vec![(id(2), to), (id(1), a)],
            Box::new(move |b| {
                let _ = btx.send(b);
            }),
        );
        let bodies = brx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(
            bodies,
            vec![Ok(Bytes::from_static(b"four")), Err(ReadFailure::Io)]
        );
    }

    #[test]
    fn a_read_behind_a_long_run_of_writes_comes_back_first() {
        let dir = TempDir::new("io-order");
        let (io, rx) = start(&dir);
        let a = Loc {
            seg: 1,
            off: 0,
            len: 3,
        };
        io.submit(vec![SpillOp::Write {
            loc: a,
            id: id(1),
            body: Bytes::from_static(b"one"),
        }]);
        wait(&rx);
        // Many writes, then a read of a record already on disk, in one go.
        let n = SLICE * 8;
        let body = Bytes::from(vec![b'x'; 100]);
        let mut ops: Vec<SpillOp> = (0..n)
            .map(|i| SpillOp::Write {
                loc: Loc {
                    seg: 2,
                    off: (i as u64 * (crate::engine::spill::RECORD_HEADER + 100)) as u32,
                    len: 100,
                },
                id: id(2),
                body: body.clone(),
            })
            .collect();
        ops.push(SpillOp::Read {
            h: 1,
            id: id(1),
            loc: a,
        });
        io.submit(ops);
        let first = wait(&rx);
        assert!(
            matches!(
                first.as_slice(),
                [SpillDone::Read {
                    h: 1,
                    result: Ok(_),
                    ..
                }]
            ),
            "the read was reported after writes: {first:?}"
        );
        // The writes follow, a slice at a time, all of them.
        let end = (n as u64 * (crate::engine::spill::RECORD_HEADER + 100)) as u32;
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut last = 0;
        while last < end && Instant::now() < deadline {
            for d in wait(&rx) {
                if let SpillDone::Written { seg: 2, end } = d {
                    last = end;
                }
            }
        }
        assert_eq!(last, end);
    }

    #[test]
    fn a_write_to_an_unwritable_place_reports_the_fault() {
        let dir = TempDir::new("fail");
        let (io, rx) = start(&dir);
        // A directory where the segment file should be: open fails.
        std::fs::create_dir(segment::path(dir.path(), 5)).unwrap();
        io.submit(vec![SpillOp::Write {
            loc: Loc {
                seg: 5,
                off: 0,
                len: 1,
            },
            id: id(1),
            body: Bytes::from_static(b"x"),
        }]);
        assert_eq!(
            wait(&rx),
            vec![SpillDone::WriteFailed {
                seg: 5,
                fault: SpillFault::WriteError
            }]
        );
        assert_eq!(io.stats.io_errors.load(Ordering::Relaxed), 1);
    }
}
