//! A small loopback TCP proxy between the clients and a server, through which
//! the nemesis delays or drops client requests.
//!
//! The fault applies to the client-to-server direction, per chunk read: under
//! `Delay(ms)` each chunk waits before it is forwarded; under `Drop(p)` each
//! chunk is, with probability `p`, discarded and both connections closed, so
//! the request never reaches the server and the client cannot tell whether it
//! did (the history records such requests as `info`). Answers flow back unchanged.
//! The proxy listens on 127.0.0.1 only.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the proxy currently does to requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fault {
    /// Forward faithfully.
    None,
    /// Hold each chunk this many milliseconds.
    Delay(u64),
    /// Drop the connection with this probability per chunk.
    Drop(f64),
}

/// A running proxy; change its fault with [`Proxy::set`].
#[derive(Clone)]
pub struct Proxy {
    pub addr: SocketAddr,
    fault: Arc<Mutex<Fault>>,
    rng: Arc<Mutex<StdRng>>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards to `upstream`.
    pub async fn start(upstream: SocketAddr, seed: u64) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let proxy = Proxy {
            addr: listener.local_addr()?,
            fault: Arc::new(Mutex::new(Fault::None)),
            rng: Arc::new(Mutex::new(StdRng::seed_from_u64(seed))),
        };
        let accept = proxy.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let p = accept.clone();
                tokio::spawn(async move {
                    let _ = p.pipe(client, upstream).await;
                });
            }
        });
        Ok(proxy)
    }

    /// Sets the fault for every chunk from now on.
    pub fn set(&self, fault: Fault) {
        *self.fault.lock().unwrap_or_else(|e| e.into_inner()) = fault;
    }

    fn fault(&self) -> Fault {
        *self.fault.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn roll(&self, p: f64) -> bool {
        self.rng.lock().unwrap_or_else(|e| e.into_inner()).random_bool(p.clamp(0.0, 1.0))
    }

    async fn pipe(&self, client: TcpStream, upstream: SocketAddr) -> std::io::Result<()> {
        let server = TcpStream::connect(upstream).await?;
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        let (mut client_rd, mut client_wr) = client.into_split();
        let (mut server_rd, mut server_wr) = server.into_split();
        let back = tokio::spawn(async move { tokio::io::copy(&mut server_rd, &mut client_wr).await });
        let mut buf = vec![0u8; 64 * 1024];
        let result = loop {
            let n = match client_rd.read(&mut buf).await {
                Ok(0) | Err(_) => break Ok(()),
                Ok(n) => n,
            };
            match self.fault() {
                Fault::None => {}
                Fault::Delay(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                Fault::Drop(p) if self.roll(p) => break Ok(()),
                Fault::Drop(_) => {}
            }
            if let Err(e) = server_wr.write_all(&buf[..n]).await {
                break Err(e);
            }
        };
        back.abort();
        result
    }
}
