//! Decoding target for `POST /v1/locks/acquire` bodies: arbitrary bytes through
//! `http::locks::decode_acquire`, the function the server's acquire handler
//! runs (JSON decoding naming the field, unknown fields refused, names and
//! lease bounds validated). It must never panic; a rejection is a 400 with a
//! machine-readable code; an accepted body survives a re-encode/decode round
//! trip unchanged.

#![no_main]

use fencing_server::http::locks::decode_acquire;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match decode_acquire(data) {
        Ok(req) => {
            let again = decode_acquire(&serde_json::to_vec(&*req).unwrap()).expect("re-encoded body decodes");
            assert_eq!(req, again);
        }
        Err(err) => {
            assert_eq!(err.status.as_u16(), 400, "{err:?}");
            assert!(err.code == "malformed_json" || err.code == "invalid_field", "{err:?}");
        }
    }
});
