//! The reference fencing host.
//!
//! It decides every write with the `fencing:guard` component (or, when asked,
//! the same rules linked natively), stores data behind durable fences, and
//! serves a lease-based lock service that hands out fencing tokens.
//!
//! # Layout
//! - [`guard`]: the `Guard` trait, the native and Wasm implementations, plugin
//!   loading, caching, compatibility checks and hot swap.
//! - [`http`]: JSON errors naming the field, the JSON extractor, body limits, the server loop.
//! - [`telemetry`]: the Prometheus registry behind `GET /metrics`.
//! - [`vectors`]: the shared test vectors (`tests/vectors/*.json`) and their runner.
//! - [`chaos`]: the safety campaign (fault injection, history, checker).
//! - [`cli`]: the `fencing` command line, one file per subcommand.

pub mod chaos;
pub mod cli;
pub mod guard;
pub mod http;
pub mod telemetry;
pub mod vectors;
