//! The `fencing` command: the reference server's command line, the client
//! commands, the benchmarks and the shared-vectors runner.
//!
//! # Layout
//! - [`cli`](mod@cli): the command line, one file per subcommand (`serve`,
//!   `lock`, `write`/`read`, `admin`, `chaos`, `bench`, `check`, `plugin`,
//!   `demo`); flags become the server's and the campaign's settings here.
//! - [`bench`](mod@bench): the load generators behind `fencing bench`.
//! - [`vectors`]: the shared test vectors (`tests/vectors/*.json`), random
//!   cases, and their runner behind `fencing check`.

pub mod bench;
pub mod cli;
pub mod vectors;

pub use cli::main;
