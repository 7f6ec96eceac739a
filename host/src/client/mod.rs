//! HTTP clients for the `fencing` services (used by the CLI, tests and benches).

pub mod storage;
