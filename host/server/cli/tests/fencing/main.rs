//! The `fencing` command's integration tests, one binary: each module starts
//! the built binary (`fencing serve`, `lock`, `write`, `chaos`, `bench`, `check`,
//! `plugin`, `demo`) as a user would and checks what it does.

mod admin;
mod auth;
mod bad_input;
mod bench_locks;
mod bench_writes;
mod chaos_campaign;
mod chaos_cluster;
mod chaos_process_groups;
mod chaos_report;
mod demo_report;
mod hostile;
mod http_busy;
mod http_connections;
mod http_edges;
mod locks_demo;
mod locks_process;
mod plugin_cli;
mod signed;
mod sqlite_extension;
mod storage_cli;
mod storage_disk_full;
mod storage_kill;
mod storage_postgres;
mod storage_quota;
mod vectors;
