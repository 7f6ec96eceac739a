//! Decoding target for `POST /v1/locks/acquire` bodies: arbitrary bytes through
//! the server's JSON decoder (`http::decode_json`). It must never panic; a body
//! it accepts must survive a re-encode/decode round trip unchanged; a rejected
//! body is a 400 with a machine-readable code.

#![no_main]

use fencing_host::chaos::wire::AcquireRequest;
use fencing_host::http::decode_json;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match decode_json::<AcquireRequest>(data) {
        Ok(req) => {
            let again: AcquireRequest =
                decode_json(&serde_json::to_vec(&req).unwrap()).expect("re-encoded body decodes");
            assert_eq!(req, again);
        }
        Err(err) => {
            assert_eq!(err.status.as_u16(), 400, "{err:?}");
            assert!(err.code == "malformed_json" || err.code == "invalid_field");
        }
    }
});
