//! Decoding target for `POST /v1/storage/write` bodies: arbitrary bytes through
//! `http::storage::decode_write`, the function the server's write handler runs
//! (JSON decoding naming the field, base64 of `bytes`, name and size
//! validation). It must never panic; a rejection is a 400 (or 413 for an
//! object over the size limit) with a machine-readable code; an accepted body,
//! re-encoded as the server's own `WriteBody`, decodes to the same request.

#![no_main]

use base64::Engine;
use fencing_server::http::storage::decode_write;
use fencing_api::wire::storage::{WriteBody, WritePayload};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match decode_write(data) {
        Ok(req) => {
            let body = WriteBody {
                resource_id: req.resource_id.clone(),
                fencing_token: req.token,
                write_payload: WritePayload {
                    file_path: req.file_path.clone(),
                    mutation_type: req.mutation,
                    bytes: Some(base64::engine::general_purpose::STANDARD.encode(&req.bytes)),
                },
                lock_id: Some(req.lock_id.clone()),
                sequence: req.sequence,
            };
            let again = decode_write(&serde_json::to_vec(&body).unwrap()).expect("re-encoded body decodes");
            assert_eq!(req, again);
        }
        Err(err) => match err.status.as_u16() {
            400 => assert!(err.code == "malformed_json" || err.code == "invalid_field", "{err:?}"),
            413 => assert_eq!(err.code, "object_too_large", "{err:?}"),
            _ => panic!("unexpected rejection {err:?}"),
        },
    }
});
