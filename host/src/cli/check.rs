//! `fencing check --vectors DIR`.

use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Directory of `*.json` vector files.
    #[arg(long, default_value = "tests/vectors")]
    vectors: PathBuf,
}

pub fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let _ = args;
    anyhow::bail!("vector runner not built yet")
}
