//! The reference fencing host.
//!
//! It decides every write with the `fencing:guard` component (or, when asked,
//! the same rules linked natively), stores data behind durable fences, and
//! serves a lease-based lock service that hands out fencing tokens.
//!
//! # Layout
//! - [`http`]: JSON errors naming the field, the JSON extractor, body limits, the server loop.
//! - [`locks`]: the lock service (leases with fencing tokens), embedded and on etcd.
//! - [`client`]: HTTP clients, including the lease-keeping lock client.
//! - [`telemetry`]: the Prometheus registry behind `GET /metrics`.
//! - [`vectors`]: the shared test vectors (`tests/vectors/*.json`) and their runner.
//! - [`chaos`]: the safety campaign (fault injection, history, checker).
//! - [`cli`]: the `fencing` command line, one file per subcommand.

pub mod bench;
pub mod chaos;
pub mod cli;
pub mod client;
pub mod http;
pub mod locks;
pub mod storage;
pub mod telemetry;
pub mod vectors;
pub mod wire;
