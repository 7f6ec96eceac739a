//! The lock service's integration tests, one binary: the embedded service
//! (expiry, waiting, lease ids, token modes, the journal across reopens) and
//! etcd (a real `etcd`: one member, and three with the leader killed).

mod locks_embedded;
mod locks_etcd;
