//! Decoding target for `POST /v1/storage/write` bodies: arbitrary bytes through
//! the server's JSON decoder (`http::decode_json`). It must never panic; a body
//! it accepts must survive a re-encode/decode round trip unchanged, and its
//! `bytes` either decode as base64 or are reported (never a panic).

#![no_main]

use base64::Engine;
use fencing_host::chaos::wire::WriteRequest;
use fencing_host::http::decode_json;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match decode_json::<WriteRequest>(data) {
        Ok(req) => {
            let again: WriteRequest = decode_json(&serde_json::to_vec(&req).unwrap()).expect("re-encoded body decodes");
            assert_eq!(req, again);
            let _ = base64::engine::general_purpose::STANDARD.decode(&req.write_payload.bytes);
        }
        Err(err) => {
            assert_eq!(err.status.as_u16(), 400, "{err:?}");
            assert!(err.code == "malformed_json" || err.code == "invalid_field");
        }
    }
});
