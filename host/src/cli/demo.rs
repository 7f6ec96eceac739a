//! `fencing demo`: placeholder replaced below.
use clap::Args;
use std::process::ExitCode;
#[derive(Debug, Args)]
pub struct DemoArgs {}
pub fn run(_: DemoArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not yet")
}
