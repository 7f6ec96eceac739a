//! `fencing bench ...`: load generators (see [`crate::bench`]).

use clap::{Args, Subcommand};
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Durable fenced writes/s and latency for 1, 4, 16 writers, beside SQLite's conditional UPDATE.
    Writes(crate::bench::writes::WritesArgs),
}

pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        BenchCommand::Writes(a) => crate::bench::writes::run(a),
    }
}
