//! Serialized jobs (`job_codec::JobRecord`), as they arrive in REPLJOB /
//! YOURJOBS frames and LOADJOB records, and their conversion into engine
//! jobs (`Engine::job_from_record`, both flavours) and registration.
//!
//! Properties: `validate`, `decode` and `decode_bytes` agree; a decoded
//! record re-encodes to exactly the bytes it came from; the extension
//! section decodes or is ignored, never panics.
#![no_main]

use bytes::Bytes;
use disque::engine::records::{ext_of_record, Flavor};
use disque::protocol::job_codec::JobRecord;
use disque_fuzz_common::{engine_with_peers, NOW};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let v = JobRecord::validate(data);
    let d = JobRecord::decode(data);
    let bytes = Bytes::copy_from_slice(data);
    let db = JobRecord::decode_bytes(&bytes);
    assert_eq!(v.is_ok(), d.is_ok());
    assert_eq!(d, db, "decode and decode_bytes differ");
    let Ok((rec, used)) = d else {
        return;
    };
    assert_eq!(v, Ok(used));
    assert_eq!(rec.encoded_len(), used);
    // State and gc_retry share a byte and the ext bit lives in `flags` on
    // the wire, so the encoding is exactly the input.
    assert_eq!(&rec.to_bytes()[..], &data[..used], "re-encoding differs");
    let _ = ext_of_record(&rec);
    let mut engine = engine_with_peers();
    for flavor in [Flavor::Message, Flavor::Storage] {
        if let Some(job) = engine.job_from_record(&rec, flavor, NOW) {
            if let Some(h) = engine.register_with(job, ext_of_record(&rec)) {
                let _ = engine.job_record(h, flavor, NOW);
                engine.update_awake(h, NOW);
            }
        }
    }
    engine.tick(NOW + 3_600_000);
    let _ = engine.take_effects();
});
