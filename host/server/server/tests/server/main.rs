//! The server's integration tests, one binary: the storage engines, the lock
//! service (embedded and etcd), the lock client and the HTTP API, in process.

mod arguments;
mod locks_client;
mod locks_embedded;
mod locks_etcd;
mod storage_http;
mod storage_redb;
