//! The server's integration tests, one binary: the HTTP API in process (the
//! storage routes over the redb engine, the lock client against the lock
//! routes, the shared argument vectors through both, and a whole server
//! built from a typed configuration). The store's and the lock service's
//! own tests are beside their crates (`host/server/store/tests`,
//! `host/server/locks/tests`).

mod arguments;
mod assembly;
mod locks_client;
mod storage_http;
