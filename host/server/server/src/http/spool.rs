//! Receiving request bodies without holding them in memory while they
//! arrive: the first [`SPOOL_AFTER`] bytes stay in memory, the rest goes to an
//! anonymous temporary file as it comes off the socket. A client that sends
//! slowly, or stops half-way, holds at most that much of the server's memory,
//! however large its body.
//!
//! A spooled body is read back only once it is complete, and only under one
//! of [`SPOOLED_AT_ONCE`] permits, held until its request is answered (the
//! storage write keeps it through the commit). So the memory that decoding
//! and applying large bodies takes is bounded by the permits, not by how many
//! clients are sending.
//!
//! Invariants:
//! - bytes are counted as they arrive, and a body is refused at the byte
//!   that passes [`MAX_BODY_BYTES`] (413, connection closed); a client that
//!   sent `Expect: 100-continue` with a `Content-Length` over it is refused
//!   before it sends anything (a client that does not wait for the go-ahead
//!   is read up to the limit, so it is still writing when the answer comes,
//!   and reads it rather than a reset);
//! - a stall past the body timeout is a 408 (the timeout layer's error,
//!   recognised here), and so is a body below the minimum rate; a slow body
//!   and a spooled one each take a slot of the server's budget (`budget.rs`),
//!   503 when none is free, as when the process is out of descriptors;
//! - the temporary file never has a name (`O_TMPFILE`, or unlinked at
//!   creation, in `TMPDIR`), so no exit, kill -9 included, leaves it behind;
//! - a body that fails any of this reaches no handler, so it changes nothing.

use super::ApiError;
use super::budget::{BODY_TIMEOUT, Peer, SLOW_AFTER, Slot, SpoolSlot};
use axum::extract::Request;
use axum::http::{StatusCode, header};
use futures::StreamExt;
use std::io::{Read, Seek, SeekFrom};
use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

use tokio::sync::{Semaphore, SemaphorePermit};

/// Largest request body any endpoint accepts (bytes). Larger bodies get 413.
pub const MAX_BODY_BYTES: usize = 8 << 20;

/// The code of that 413: the body was refused unread.
pub(super) const BODY_TOO_LARGE: &str = "body_too_large";

/// The code of the 503 when the process has no descriptor left for a spool file.
pub(super) const OUT_OF_DESCRIPTORS: &str = "out_of_descriptors";

/// Bytes of a body kept in memory; past this the body is spooled to disk.
pub const SPOOL_AFTER: usize = 64 << 10;

/// Spooled bodies decoded and applied at once; the others wait, fully received, on disk.
pub const SPOOLED_AT_ONCE: usize = 4;

static SPOOLED: Semaphore = Semaphore::const_new(SPOOLED_AT_ONCE);

/// A whole body, in memory, and the permit a spooled one holds.
pub struct Received {
    pub bytes: Vec<u8>,
    /// Present when the body was spooled: keep it while its contents are in use.
    pub permit: Held,
}

/// A spooled body's permit; dropping it lets the next spooled body be read back.
pub struct Held(#[allow(dead_code)] Option<SemaphorePermit<'static>>);

impl Held {
    /// Whether the body was spooled (and this holds a permit).
    pub fn spooled(&self) -> bool {
        self.0.is_some()
    }
}

/// Receives `req`'s body: in memory up to [`SPOOL_AFTER`] bytes, through a
/// temporary file beyond, read back under a permit once complete.
pub async fn receive(req: Request) -> Result<Received, ApiError> {
    let declared =
        req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    let expects_continue =
        req.headers().get(header::EXPECT).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    if expects_continue && declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        // The client waits for a go-ahead before sending: it hears the refusal instead.
        return Err(too_large());
    }
    let peer = req.extensions().get::<Peer>().cloned();
    let mut stream = req.into_body().into_data_stream();
    let mut memory = Vec::new();
    let mut file: Option<tokio::fs::File> = None;
    let mut slots = Slots::default();
    let start = Instant::now();
    let mut total = 0usize;
    while let Some(chunk) = next_chunk(&mut stream, peer.as_ref(), &mut slots, start, total).await? {
        total += chunk.len();
        if total > MAX_BODY_BYTES {
            return Err(too_large());
        }
        match &mut file {
            Some(f) => f.write_all(&chunk).await.map_err(spool_error)?,
            None if memory.len() + chunk.len() <= SPOOL_AFTER => memory.extend_from_slice(&chunk),
            None => {
                let slow = slots.slow.is_some();
                slots.spool = peer.as_ref().map(|p| p.spool(slow)).transpose()?;
                let std = tokio::task::spawn_blocking(tempfile::tempfile)
                    .await
                    .map_err(ApiError::internal)?
                    .map_err(spool_error)?;
                let mut f = tokio::fs::File::from_std(std);
                f.write_all(&std::mem::take(&mut memory)).await.map_err(spool_error)?;
                f.write_all(&chunk).await.map_err(spool_error)?;
                file = Some(f);
            }
        }
    }
    let Some(mut f) = file else {
        return Ok(Received { bytes: memory, permit: Held(None) });
    };
    f.flush().await.map_err(spool_error)?;
    let mut std = f.into_std().await;
    let permit = SPOOLED.acquire().await.map_err(ApiError::internal)?;
    let bytes = tokio::task::spawn_blocking(move || -> std::io::Result<Vec<u8>> {
        std.seek(SeekFrom::Start(0))?;
        let mut bytes = Vec::with_capacity(total);
        std.read_to_end(&mut bytes)?;
        Ok(bytes)
    })
    .await
    .map_err(ApiError::internal)?
    .map_err(spool_error)?;
    Ok(Received { bytes, permit: Held(Some(permit)) })
}

/// The slots a body holds while it arrives and is read back.
#[derive(Default)]
struct Slots {
    /// Taken once the body is slow ([`SLOW_AFTER`]).
    slow: Option<Slot>,
    /// Taken with the temporary file (and a slow spool slot once slow).
    spool: Option<SpoolSlot>,
}

/// The body's next chunk, `None` at its end. With a [`Peer`], a body still
/// arriving after [`SLOW_AFTER`] takes a slow-body slot, and one that falls
/// below the minimum rate is a 408.
async fn next_chunk(
    stream: &mut axum::body::BodyDataStream,
    peer: Option<&Peer>,
    slots: &mut Slots,
    start: Instant,
    received: usize,
) -> Result<Option<axum::body::Bytes>, ApiError> {
    let Some(peer) = peer else {
        return stream.next().await.transpose().map_err(body_error);
    };
    loop {
        let too_slow = peer.body_deadline(start, received);
        let slow_mark = start + SLOW_AFTER;
        let wake = if slots.slow.is_none() { too_slow.min(slow_mark) } else { too_slow };
        // `next` is cancel-safe: a chunk is never lost to the timeout.
        match tokio::time::timeout_at(wake, stream.next()).await {
            Ok(chunk) => return chunk.transpose().map_err(body_error),
            Err(_) if Instant::now() >= too_slow => return Err(peer.too_slow()),
            Err(_) => {
                slots.slow = Some(peer.slow_body()?);
                if let Some(spool) = &mut slots.spool {
                    spool.now_slow()?;
                }
            }
        }
    }
}

fn too_large() -> ApiError {
    let message = format!("request body exceeds {MAX_BODY_BYTES} bytes");
    ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, BODY_TOO_LARGE, message).with_field("body")
}

/// A body that failed to arrive: 408 when it stalled past the body timeout
/// (`tower_http`'s timeout error somewhere in its source chain), 400 otherwise.
fn body_error(e: axum::Error) -> ApiError {
    let inner = e.into_inner();
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(inner.as_ref());
    while let Some(e) = source {
        if e.is::<tower_http::timeout::TimeoutError>() {
            let message = "the request body stalled longer than the server's body timeout";
            return ApiError::new(StatusCode::REQUEST_TIMEOUT, BODY_TIMEOUT, message).with_field("body");
        }
        source = e.source();
    }
    ApiError::new(StatusCode::BAD_REQUEST, "bad_body", format!("the request body could not be read: {inner}"))
        .with_field("body")
}

/// The spool file could not be written: 507 when its disk is full, 503
/// when the process is out of descriptors, 500 otherwise.
fn spool_error(e: std::io::Error) -> ApiError {
    if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
        let message = format!("the server is out of file descriptors for request bodies; retry shortly: {e}");
        return ApiError::new(StatusCode::SERVICE_UNAVAILABLE, OUT_OF_DESCRIPTORS, message).with_field("body");
    }
    if e.kind() == std::io::ErrorKind::StorageFull {
        let message = format!("no space to receive the request body in the temporary directory: {e}");
        return ApiError::new(StatusCode::INSUFFICIENT_STORAGE, "insufficient_storage", message).with_field("body");
    }
    ApiError::internal(format!("cannot spool the request body: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;

    fn request(body: Body) -> Request {
        Request::builder().method("POST").uri("/").body(body).unwrap()
    }

    /// A body sent in pieces of `piece` bytes.
    fn pieces(total: usize, piece: usize) -> Body {
        let chunks: Vec<Result<bytes::Bytes, std::io::Error>> = (0..total)
            .step_by(piece)
            .map(|at| Ok(bytes::Bytes::from((at..total.min(at + piece)).map(|i| (i % 251) as u8).collect::<Vec<_>>())))
            .collect();
        Body::from_stream(futures::stream::iter(chunks))
    }

    fn expected(total: usize) -> Vec<u8> {
        (0..total).map(|i| (i % 251) as u8).collect()
    }

    #[tokio::test]
    async fn a_small_body_stays_in_memory() {
        let got = receive(request(pieces(1000, 100))).await.unwrap();
        assert_eq!(got.bytes, expected(1000));
        assert!(!got.permit.spooled());
    }

    #[tokio::test]
    async fn a_large_body_is_spooled_and_read_back_whole() {
        let total = 3 * SPOOL_AFTER + 17;
        let got = receive(request(pieces(total, 10_000))).await.unwrap();
        assert_eq!(got.bytes, expected(total));
        assert!(got.permit.spooled());
    }

    #[tokio::test]
    async fn spooled_bodies_wait_for_a_permit() {
        let held: Vec<Received> = {
            let mut v = Vec::new();
            for _ in 0..SPOOLED_AT_ONCE {
                v.push(receive(request(pieces(SPOOL_AFTER + 1, 4096))).await.unwrap());
            }
            v
        };
        let waiting = tokio::spawn(receive(request(pieces(SPOOL_AFTER + 1, 4096))));
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert!(!waiting.is_finished(), "a fifth spooled body is read back while four are held");
        // A small body needs no permit.
        assert!(!receive(request(pieces(10, 10))).await.unwrap().permit.spooled());
        drop(held);
        let got = waiting.await.unwrap().unwrap();
        assert_eq!(got.bytes, expected(SPOOL_AFTER + 1));
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_refused_as_it_arrives() {
        let e = receive(request(pieces(MAX_BODY_BYTES + 1, 1 << 20))).await.err().unwrap();
        assert_eq!(
            (e.status, e.code, e.field.as_deref()),
            (StatusCode::PAYLOAD_TOO_LARGE, BODY_TOO_LARGE, Some("body"))
        );
        let mut req = request(Body::empty());
        req.headers_mut().insert(header::CONTENT_LENGTH, (MAX_BODY_BYTES + 1).into());
        req.headers_mut().insert(header::EXPECT, header::HeaderValue::from_static("100-continue"));
        assert_eq!(receive(req).await.err().unwrap().code, BODY_TOO_LARGE, "refused by its declared length, unread");
    }

    #[tokio::test]
    async fn a_body_that_breaks_off_is_a_bad_request() {
        let chunks: Vec<Result<bytes::Bytes, std::io::Error>> =
            vec![Ok(bytes::Bytes::from(vec![1u8; SPOOL_AFTER + 1])), Err(std::io::Error::other("connection reset"))];
        let e = receive(request(Body::from_stream(futures::stream::iter(chunks)))).await.err().unwrap();
        assert_eq!((e.status, e.code), (StatusCode::BAD_REQUEST, "bad_body"));
    }
}
