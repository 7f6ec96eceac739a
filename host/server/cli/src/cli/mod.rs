//! The `fencing` command line: one file per subcommand.
//!
//! Exit codes: 0 success, 1 failure, 2 bad input (usage errors, invalid
//! arguments or files, requests the server refused as malformed).

mod admin;
mod bench;
mod chaos;
mod check;
mod client;
mod demo;
mod keygen;
mod lock;
mod plugin;
pub mod serve;
mod values;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Fencing tokens checked at the storage boundary, by a WebAssembly component.
#[derive(Debug, Parser)]
#[command(name = "fencing", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Inspect or validate `fencing:guard` plugins.
    Plugin(plugin::PluginArgs),
    /// Run the shared test vectors through the native and Wasm guards and report agreement.
    Check(check::CheckArgs),
    /// Run the HTTP server (storage and lock roles, `GET /metrics`).
    Serve(Box<serve::ServeArgs>),
    /// Send a fenced write to the storage API.
    Write(client::WriteArgs),
    /// Read an object and its resource's fence from the storage API.
    Read(client::ReadArgs),
    /// Acquire, renew, release or inspect a lock on a running server.
    Lock(lock::LockArgs),
    /// Load generators: `bench writes`, `bench locks`.
    Bench(bench::BenchArgs),
    /// The GC-pause story end to end: a paused holder's write rejected by the fence, then the same without fencing.
    Demo(demo::DemoArgs),
    /// Fault-injection campaign against the lock service and storage, checked from its history.
    Chaos(Box<chaos::ChaosArgs>),
    /// Operator commands: raise the token ceiling after a restore, reset or retire fences, make signing keys.
    Admin(admin::AdminArgs),
}

/// Bad input from the user: reported with exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// A parser for a value named by `names` (listed in `--help` and in errors),
/// converted with the type's `FromStr`: for the runtime's enums, which know
/// their own names.
pub fn named<T>(names: impl IntoIterator<Item = &'static str>) -> impl clap::builder::TypedValueParser<Value = T>
where
    T: std::str::FromStr + Clone + Send + Sync + 'static,
    T::Err: std::fmt::Debug,
{
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(names).map(|s| s.parse::<T>().expect("every listed name parses"))
}

/// Returns a [`UsageError`] as an `anyhow::Error`.
pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    UsageError(msg.into()).into()
}

/// Parses arguments, runs the subcommand and maps errors to exit codes.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    let result = match cli.command {
        Command::Plugin(args) => plugin::run(args),
        Command::Check(args) => check::run(args),
        Command::Serve(args) => serve::run(*args),
        Command::Write(args) => client::write(args),
        Command::Read(args) => client::read(args),
        Command::Lock(args) => lock::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Chaos(args) => chaos::run(*args),
        Command::Admin(args) => admin::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            if err.chain().any(|e| e.downcast_ref::<UsageError>().is_some()) {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("FENCING_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colours only on a terminal: a log file or a pipe gets plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).with_writer(std::io::stderr).try_init();
}
