//! Connections: the accept loop, and what bounds each connection's time,
//! count and life.
//!
//! A connection is in one of three phases, and each has its own bound:
//! - **idle** (no request yet, or its last response finished): closed after
//!   `idle_timeout` without a byte;
//! - **reading a head** (the first byte of a request arrived): the whole head
//!   must arrive within `header_timeout`, so a client that sends one byte a
//!   minute cannot hold a connection;
//! - **busy** (a request is in the service, until its response body is
//!   written): the request body may stall at most `body_timeout` between
//!   frames (408) and must keep to `body_min_rate` overall, and every write
//!   of the response may wait at most `write_timeout` for the peer to read.
//!   Requests that stay busy for long (slow bodies, waiting acquisitions,
//!   spooled bodies) draw on the [`Budget`] `budget.rs` describes.
//!
//! Invariants:
//! - at most `max_connections` connections are served at once (the accept
//!   loop waits for an evicted connection to close, up to 50 ms). At the cap, the connection that has waited longest with
//!   no request in the service (idle, or still sending a head) is closed to
//!   make room; if every connection is busy, the new one gets a 503 and is
//!   closed, so the process never runs out of descriptors serving idle peers;
//! - at shutdown the listener closes first, connections with no request in the
//!   service close at once, busy ones finish their request, and after
//!   `shutdown_timeout` the loop returns whatever is still open.

use super::budget::{Budget, Peer};
use super::spool::MAX_BODY_BYTES;
use axum::Router;
use axum::body::Body;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, Semaphore, watch};
use tokio::time::{Instant, Sleep};
use tower::ServiceExt;

/// The bounds on connections (`fencing serve --header-timeout` and friends).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnLimits {
    /// From the first byte of a request to the end of its head.
    pub header_timeout: Duration,
    /// A connection with no request and no byte for this long is closed.
    pub idle_timeout: Duration,
    /// Longest stall between two parts of a request body (then 408).
    pub body_timeout: Duration,
    /// Longest a response write may wait for the peer to read.
    pub write_timeout: Duration,
    /// Most connections served at once.
    pub max_connections: usize,
    /// Longest a shutdown waits for requests in progress.
    pub shutdown_timeout: Duration,
    /// Slowest average a request body may arrive at after `body_timeout` (bytes per second).
    pub body_min_rate: u64,
    /// Most acquisitions one client address may have waiting at once.
    pub max_waiting_per_client: usize,
    /// Most request bodies spooled to temporary files at once (each holds a descriptor).
    pub spool_files: usize,
    /// Most of them one client address may send at once.
    pub max_spooling_per_client: usize,
}

impl Default for ConnLimits {
    fn default() -> ConnLimits {
        ConnLimits {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            body_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(30),
            max_connections: 4096,
            shutdown_timeout: Duration::from_secs(10),
            body_min_rate: 1024,
            max_waiting_per_client: 16,
            spool_files: 256,
            max_spooling_per_client: super::budget::DEFAULT_MAX_SPOOLING_PER_CLIENT,
        }
    }
}

/// Descriptors kept back from connections for the store, logs, database and etcd clients.
pub const RESERVED_FDS: u64 = 256;

/// Raises the soft limit on open files to the hard limit and returns the
/// limit now in force (what `--max-connections` must stay under).
pub fn raise_fd_limit() -> io::Result<u64> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).map_err(io::Error::from)?;
    // An unlimited hard limit is capped: the kernel refuses more than nr_open anyway.
    let target = hard.min(1 << 20);
    if soft < target {
        setrlimit(Resource::RLIMIT_NOFILE, target, hard).map_err(io::Error::from)?;
        return Ok(target);
    }
    Ok(soft)
}

/// The connection metrics (`fencing_http_connections_*`).
#[derive(Clone, Default)]
pub struct ConnMetrics {
    open: Gauge,
    closed: Family<[(&'static str, &'static str); 1], Counter>,
}

impl ConnMetrics {
    /// Registers the families in `metrics`.
    pub fn register(metrics: &crate::telemetry::Metrics) -> ConnMetrics {
        let m = ConnMetrics::default();
        metrics.register(|reg| {
            let reg = reg.sub_registry_with_prefix("fencing_http_connections");
            reg.register("open", "HTTP connections open now", m.open.clone());
            reg.register(
                "closed_by_server",
                "Connections the server closed on its own, by reason (idle_timeout, header_timeout, \
                 write_timeout, evicted, refused, shutdown)",
                m.closed.clone(),
            );
        });
        m
    }

    fn closed(&self, reason: &'static str) {
        self.closed.get_or_create(&[("reason", reason)]).inc();
    }
}

/// One connection's phase, shared by its I/O, its service and the registry.
struct ConnState {
    /// Requests in the service whose response body is not yet written.
    busy: AtomicUsize,
    /// Whether a byte of the next request's head has arrived.
    head_started: AtomicBool,
    /// When the current phase began (the last response finished, or the head's first byte).
    since: Mutex<Instant>,
    /// Set by the registry to ask an idle connection to close.
    evict: AtomicBool,
    wake: Notify,
    /// Why the server closed it, if it did.
    reason: Mutex<Option<&'static str>>,
    /// A read that waited while busy, with no deadline: woken when the
    /// connection turns idle so it arms the idle deadline.
    reader: Mutex<Option<std::task::Waker>>,
}

impl ConnState {
    fn new() -> ConnState {
        ConnState {
            busy: AtomicUsize::new(0),
            head_started: AtomicBool::new(false),
            since: Mutex::new(Instant::now()),
            evict: AtomicBool::new(false),
            wake: Notify::new(),
            reason: Mutex::new(None),
            reader: Mutex::new(None),
        }
    }

    fn is_idle(&self) -> bool {
        self.busy.load(Ordering::Acquire) == 0
    }

    fn since(&self) -> Instant {
        *self.since.lock().expect("conn state")
    }

    fn bytes_arrived(&self) {
        if self.is_idle() && !self.head_started.swap(true, Ordering::AcqRel) {
            *self.since.lock().expect("conn state") = Instant::now();
        }
    }

    fn begin(&self) {
        self.busy.fetch_add(1, Ordering::AcqRel);
        self.head_started.store(false, Ordering::Release);
    }

    fn end(&self) {
        if self.busy.fetch_sub(1, Ordering::AcqRel) == 1 {
            *self.since.lock().expect("conn state") = Instant::now();
            if let Some(reader) = self.reader.lock().expect("conn state").take() {
                reader.wake();
            }
        }
    }

    /// The deadline of a pending read, and its reason; none while busy.
    fn read_deadline(&self, limits: &ConnLimits) -> Option<(Instant, &'static str)> {
        if !self.is_idle() {
            return None;
        }
        Some(if self.head_started.load(Ordering::Acquire) {
            (self.since() + limits.header_timeout, "header_timeout")
        } else {
            (self.since() + limits.idle_timeout, "idle_timeout")
        })
    }

    fn close_for(&self, reason: &'static str) {
        self.reason.lock().expect("conn state").get_or_insert(reason);
    }
}

/// Marks its connection busy until dropped (with the response body).
struct Busy(Arc<ConnState>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// The open connections.
#[derive(Default)]
struct Registry {
    conns: Mutex<HashMap<u64, Arc<ConnState>>>,
    next: AtomicU64,
    removed: Notify,
}

impl Registry {
    fn len(&self) -> usize {
        self.conns.lock().expect("registry").len()
    }

    fn insert(&self) -> (u64, Arc<ConnState>) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let state = Arc::new(ConnState::new());
        self.conns.lock().expect("registry").insert(id, state.clone());
        (id, state)
    }

    fn remove(&self, id: u64) {
        let mut conns = self.conns.lock().expect("registry");
        conns.remove(&id);
        self.removed.notify_waiters();
    }

    /// Asks the connection idle the longest to close; false if none is idle.
    fn evict_idle(&self) -> bool {
        let conns = self.conns.lock().expect("registry");
        let oldest =
            conns.values().filter(|c| c.is_idle() && !c.evict.load(Ordering::Acquire)).min_by_key(|c| c.since());
        let Some(victim) = oldest else { return false };
        victim.evict.store(true, Ordering::Release);
        victim.wake.notify_one();
        true
    }

    /// Waits (at most `bound`) until fewer than `n` connections are open.
    async fn wait_below(&self, n: usize, bound: Duration) {
        let deadline = Instant::now() + bound;
        loop {
            let removed = self.removed.notified();
            if self.len() < n || tokio::time::timeout_at(deadline, removed).await.is_err() {
                return;
            }
        }
    }
}

/// The socket, with the read deadline of its phase and the write deadline.
struct Deadlines {
    inner: TcpStream,
    state: Arc<ConnState>,
    limits: ConnLimits,
    read_timer: Pin<Box<Sleep>>,
    read_deadline: Option<Instant>,
    write_timer: Pin<Box<Sleep>>,
    write_deadline: Option<Instant>,
    /// The JSON answer sent in place of one of hyper's own (`framing.rs`), and how much of it is sent.
    replacement: Option<(Vec<u8>, usize)>,
}

impl Deadlines {
    fn new(inner: TcpStream, state: Arc<ConnState>, limits: ConnLimits) -> Deadlines {
        let far = Instant::now() + Duration::from_secs(86_400);
        Deadlines {
            inner,
            state,
            limits,
            read_timer: Box::pin(tokio::time::sleep_until(far)),
            read_deadline: None,
            write_timer: Box::pin(tokio::time::sleep_until(far)),
            write_deadline: None,
            replacement: None,
        }
    }

    /// Takes `bytes` in place of hyper's own answer if they are one (only
    /// with no request in the service): true when they were replaced.
    fn replaces(&mut self, bytes: &[u8]) -> bool {
        if self.replacement.is_some() || !self.state.is_idle() {
            return false;
        }
        match super::framing::json_answer(bytes) {
            Some(answer) => {
                self.replacement = Some((answer, 0));
                true
            }
            None => false,
        }
    }

    /// Sends what is left of a replacement answer.
    fn poll_replacement(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((bytes, sent)) = self.replacement.take() {
            if sent == bytes.len() {
                break;
            }
            let result = Pin::new(&mut self.inner).poll_write(cx, &bytes[sent..]);
            match self.guard_write(cx, result) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => self.replacement = Some((bytes, sent + n)),
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => {
                    self.replacement = Some((bytes, sent));
                    return Poll::Pending;
                }
            }
        }
        Poll::Ready(Ok(()))
    }

    /// A write that made progress clears its deadline; one that waits arms it.
    fn guard_write<T>(&mut self, cx: &mut Context<'_>, result: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if result.is_ready() {
            self.write_deadline = None;
            return result;
        }
        if self.write_deadline.is_none() {
            let deadline = Instant::now() + self.limits.write_timeout;
            self.write_timer.as_mut().reset(deadline);
            self.write_deadline = Some(deadline);
        }
        if self.write_timer.as_mut().poll(cx).is_ready() {
            self.state.close_for("write_timeout");
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "the peer stopped reading")));
        }
        Poll::Pending
    }
}

impl AsyncRead for Deadlines {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Pending => {}
            ready => {
                if buf.filled().len() > before {
                    this.state.bytes_arrived();
                }
                this.read_deadline = None;
                return ready;
            }
        }
        let Some((deadline, reason)) = this.state.read_deadline(&this.limits) else {
            this.read_deadline = None;
            *this.state.reader.lock().expect("conn state") = Some(cx.waker().clone());
            // The response may have finished in between: then the deadline applies now.
            if this.state.is_idle() {
                cx.waker().wake_by_ref();
            }
            return Poll::Pending;
        };
        if this.read_deadline != Some(deadline) {
            this.read_timer.as_mut().reset(deadline);
            this.read_deadline = Some(deadline);
        }
        if this.read_timer.as_mut().poll(cx).is_ready() {
            this.state.close_for(reason);
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, reason)));
        }
        Poll::Pending
    }
}

impl AsyncWrite for Deadlines {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.replaces(buf) {
            // Taken whole; sent by this call, or by the flush hyper makes next.
            return match this.poll_replacement(cx) {
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                _ => Poll::Ready(Ok(buf.len())),
            };
        }
        std::task::ready!(this.poll_replacement(cx))?;
        let result = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.guard_write(cx, result)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        // hyper's own answers are one short head; only those are looked at.
        if total <= 1024 && this.state.is_idle() {
            let joined: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
            if this.replaces(&joined) {
                return match this.poll_replacement(cx) {
                    Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                    _ => Poll::Ready(Ok(total)),
                };
            }
        }
        std::task::ready!(this.poll_replacement(cx))?;
        let result = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.guard_write(cx, result)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        std::task::ready!(this.poll_replacement(cx))?;
        let result = Pin::new(&mut this.inner).poll_flush(cx);
        this.guard_write(cx, result)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        std::task::ready!(this.poll_replacement(cx))?;
        let result = Pin::new(&mut this.inner).poll_shutdown(cx);
        this.guard_write(cx, result)
    }
}

/// A response body that keeps its connection busy until it is written.
struct Tracked {
    body: Body,
    _busy: Busy,
}

impl http_body::Body for Tracked {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// Serves `app` on `listener` within `limits` until `shutdown` completes.
pub async fn serve_with(
    listener: TcpListener,
    app: Router,
    limits: ConnLimits,
    metrics: ConnMetrics,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let app = app
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(limits.body_timeout));
    let registry = Arc::new(Registry::default());
    let budget = Arc::new(
        Budget::new(
            limits.max_connections,
            limits.spool_files,
            limits.max_waiting_per_client,
            limits.body_min_rate,
            limits.body_timeout,
        )
        .with_max_spooling_per_client(limits.max_spooling_per_client),
    );
    let refusals = Arc::new(Semaphore::new(64));
    let (stop, stopping) = watch::channel(false);
    let mut last_accept_warning: Option<Instant> = None;
    tokio::pin!(shutdown);
    loop {
        let tcp = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    // Out of descriptors (or a transient error): make room and retry shortly.
                    if last_accept_warning.is_none_or(|t| t.elapsed() > Duration::from_secs(1)) {
                        tracing::warn!(error = %e, open = registry.len(), "accept failed");
                        last_accept_warning = Some(Instant::now());
                    }
                    registry.evict_idle();
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        // A response written in more than one segment (pipelined answers,
        // streamed bodies) must not wait for the peer's delayed ACK.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY not set");
        }
        if registry.len() >= limits.max_connections {
            if !registry.evict_idle() {
                metrics.closed("refused");
                if let Ok(permit) = refusals.clone().try_acquire_owned() {
                    tokio::spawn(async move {
                        refuse(tcp).await;
                        drop(permit);
                    });
                }
                continue;
            }
            // Let the evicted connection give its descriptor back before this one is served.
            registry.wait_below(limits.max_connections, Duration::from_millis(50)).await;
        }
        let (id, state) = registry.insert();
        metrics.open.inc();
        let peer = tcp.peer_addr().map(|a| a.ip()).unwrap_or(std::net::Ipv4Addr::UNSPECIFIED.into());
        let peer = Peer::new(budget.clone(), peer);
        let conn = Conn { state, app: app.clone(), limits, peer, stopping: stopping.clone() };
        let (registry, metrics) = (registry.clone(), metrics.clone());
        tokio::spawn(async move {
            let reason = conn.run(tcp).await;
            if let Some(reason) = reason {
                metrics.closed(reason);
            }
            metrics.open.dec();
            registry.remove(id);
        });
    }
    drop(listener);
    let _ = stop.send(true);
    registry.wait_below(1, limits.shutdown_timeout).await;
    if registry.len() > 0 {
        tracing::warn!(
            open = registry.len(),
            timeout = ?limits.shutdown_timeout,
            "shutdown: requests still in progress are abandoned"
        );
    }
    Ok(())
}

/// One accepted connection.
struct Conn {
    state: Arc<ConnState>,
    app: Router,
    limits: ConnLimits,
    peer: Peer,
    stopping: watch::Receiver<bool>,
}

impl Conn {
    /// Serves the connection to its end; the reason if the server closed it.
    async fn run(mut self, tcp: TcpStream) -> Option<&'static str> {
        let state = self.state.clone();
        let io = TokioIo::new(Deadlines::new(tcp, state.clone(), self.limits));
        let app = self.app.clone();
        let service_state = state.clone();
        let peer = self.peer.clone();
        let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
            service_state.begin();
            let busy = Busy(service_state.clone());
            let app = app.clone();
            req.extensions_mut().insert(peer.clone());
            async move {
                let response = app.oneshot(req.map(Body::new)).await?;
                Ok::<_, std::convert::Infallible>(response.map(|body| Tracked { body, _busy: busy }))
            }
        });
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder.timer(TokioTimer::new()).header_read_timeout(None).keep_alive(true);
        let conn = builder.serve_connection(io, service);
        tokio::pin!(conn);
        let mut closing = false;
        loop {
            tokio::select! {
                result = conn.as_mut() => {
                    if let Err(e) = result {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                    break;
                }
                _ = state.wake.notified(), if !closing => {
                    if state.evict.swap(false, Ordering::AcqRel) && state.is_idle() {
                        state.close_for("evicted");
                        break;
                    }
                }
                _ = self.stopping.wait_for(|stop| *stop), if !closing => {
                    closing = true;
                    if state.is_idle() {
                        state.close_for("shutdown");
                        break;
                    }
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
        *state.reason.lock().expect("conn state")
    }
}

/// Answers a connection over the cap with 503 and closes it, reading what the
/// peer sent (briefly) so the close does not reset the answer away.
async fn refuse(mut tcp: TcpStream) {
    const BODY: &str = r#"{"error":{"code":"too_many_connections","message":"the server is at its connection limit (--max-connections); retry shortly"}}"#;
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n",
        BODY.len()
    );
    let answer = async {
        tcp.write_all(head.as_bytes()).await?;
        tcp.write_all(BODY.as_bytes()).await?;
        tcp.shutdown().await?;
        let mut sink = [0u8; 4096];
        while tokio::io::AsyncReadExt::read(&mut tcp, &mut sink).await? > 0 {}
        io::Result::Ok(())
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), answer).await;
}
