//! The AOF loader: the strict record reader (`aof::reader::AofReader`)
//! over the file's bytes, and every record applied to an engine the way
//! startup loading does (`aof::loader::apply`, both `aof-enqueue-jobs-once`
//! settings), then the engine's timers run over the loaded jobs.
//!
//! Property: the reader's result (records, then clean end / truncated /
//! corrupt at an offset) does not depend on how the file's bytes arrive
//! from `read` (the first input byte picks a short-read size); only the
//! wording of a corruption's reason may.
#![no_main]

use std::io::Read;

use disque::aof::loader::{apply, LoadOptions};
use disque::aof::reader::{AofReader, ReadError, Record};
use disque_fuzz_common::{engine_with_peers, NOW};
use libfuzzer_sys::fuzz_target;

/// A reader that returns at most `max` bytes per call.
struct Short<'a> {
    data: &'a [u8],
    max: usize,
}

impl Read for Short<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let n = self.max.min(out.len()).min(self.data.len());
        out[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

fn read_all<R: Read>(r: R) -> (Vec<(u64, Record)>, Option<ReadError>) {
    AofReader::new(r).read_all()
}

/// The error without its free-text reason.
fn kind(e: &Option<ReadError>) -> Option<(u8, u64)> {
    e.as_ref().map(|e| match e {
        ReadError::Truncated { offset } => (0, *offset),
        ReadError::Corrupt { offset, .. } => (1, *offset),
        ReadError::Io(_) => (2, 0),
        ReadError::Version { offset, .. } => (3, *offset),
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, file)) = data.split_first() else {
        return;
    };
    let whole = read_all(file);
    let short = read_all(Short {
        data: file,
        max: usize::from(ctl) + 1,
    });
    // The reason text may differ (a partial command name is checked by
    // prefix, a complete one by value); records, the kind of failure and
    // its offset may not.
    assert_eq!(whole.0, short.0, "read size changed the records");
    assert_eq!(
        kind(&whole.1),
        kind(&short.1),
        "read size changed how reading ends"
    );
    let (records, _) = whole;
    let opts = LoadOptions {
        truncated_ok: true,
        enqueue: ctl & 1 == 1,
    };
    let mut engine = engine_with_peers();
    for (_, rec) in records {
        if apply(&mut engine, rec, opts, NOW).is_err() {
            break; // the loader refuses the file here
        }
    }
    engine.tick(NOW + 1000);
    engine.tick(NOW + 86_400_000);
    let _ = engine.take_effects();
});
